import pytest
from evalport.client._core._config import ConfigError, Settings, find_pyproject, load_settings


def write(tmp_path, text):
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    suite = tmp_path / "evals"
    suite.mkdir()
    return suite


def test_settings_from_pyproject_found_above_the_suite(tmp_path):
    suite = write(
        tmp_path,
        '[project]\nname = "x"\n\n[tool.evalport]\npath = "evals"\nrepeat = 5\n'
        'pass-rate = 0.8\nexclude-tags = ["slow"]\nreporters = ["pkg.mod:R", {use = "a:B", path = "x"}]\n'
        '[tool.evalport.judge]\nmodel = "gpt-x"\napi-key-env = "JUDGE_KEY"\n',
    )
    assert find_pyproject(suite) == tmp_path / "pyproject.toml"
    settings = load_settings(suite)
    assert settings.repeat == 5 and settings.pass_rate == 0.8
    assert settings.exclude_tags == ["slow"]
    assert settings.path == str(tmp_path / "evals")
    assert settings.judge.model == "gpt-x" and settings.judge.api_key_env == "JUDGE_KEY"
    assert settings.reporters[1] == {"use": "a:B", "path": "x"}


def test_paths_in_the_file_are_relative_to_it_wherever_the_command_runs(tmp_path, monkeypatch):
    suite = write(
        tmp_path,
        '[tool.evalport]\ncache-dir = ".cache/runs"\nout = "reports/last"\njunit = "r/j.xml"\n'
        'baseline = "/abs/base.json"\n[tool.evalport.judge]\nmodel = "m"\njudge-cache = "jc"\n',
    )
    monkeypatch.chdir(suite)
    settings = load_settings(suite)
    assert settings.cache_dir == str(tmp_path / ".cache/runs")
    assert settings.out == str(tmp_path / "reports/last")
    assert settings.junit == str(tmp_path / "r/j.xml")
    assert settings.baseline == "/abs/base.json"
    assert settings.judge.judge_cache == str(tmp_path / "jc")
    (tmp_path / "pyproject.toml").write_text("[tool.evalport]\nrepeat = 2\n", encoding="utf-8")
    assert load_settings(suite).cache_dir == Settings().cache_dir  # a default stays as it is


def test_no_table_means_defaults(tmp_path):
    suite = write(tmp_path, '[project]\nname = "x"\n')
    assert load_settings(suite) == Settings()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("repeats = 3", "unknown field `repeats`.*known keys: .*repeat"),
        ('repeat = "3"', r"Expected `int`, got `str` - at `\$.repeat`"),
        ("pass-rate = 1.5", "pass-rate must be within"),
        ("concurrency = 0", "concurrency must be at least 1"),
        ('target = "http://x"\nlocal = "m:a"', "not both"),
    ],
)
def test_invalid_settings_name_the_file_and_key(tmp_path, body, message):
    suite = write(tmp_path, f"[tool.evalport]\n{body}\n")
    with pytest.raises(ConfigError, match=message) as raised:
        load_settings(suite)
    assert "pyproject.toml [tool.evalport]" in str(raised.value)


def test_broken_toml_is_a_config_error(tmp_path):
    suite = write(tmp_path, "[tool.evalport\n")
    with pytest.raises(ConfigError, match="cannot read it as TOML"):
        load_settings(suite)
