"""Which judge ``evalport run`` and the pytest plugin use: ``[tool.evalport.judge]`` (with
``judge-cache``, relative to its pyproject), else ``JudgeConfig.from_env()``, else none;
and the README's environment example run against the fake chat server on loopback, twice,
the second time answered from the judge cache."""

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from evalport.client._core._config import ConfigError, Settings, load_settings
from evalport.client.cli._targets import build_judge
from evalport.client.judges import AgentLoopJudge, OpenAIJudge
from evalport.protocol._cli import main
from support.docs import docs_text
from support.servers import running_server

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "client" / "judges"))
from judge_fake_server import FakeChatServer, verdict  # noqa: E402

AGENT = f"{ROOT / 'examples' / 'support_agent.py'}:agent"

SUITE = """
from evalport.client._core._cases import eval_case


@eval_case("the greeting is helpful")
async def helpful_greeting(ctx):
    await ctx.send("hello")
    ctx.judge().helpfulness().gate()
"""


def readme_env_example() -> str:
    text = docs_text()
    section = text[text.index("<!-- section:runner -->") : text.index("<!-- /section:runner -->")]
    found = re.search(r"```bash\n(EVALPORT_JUDGE_MODEL=.*?)```", section, re.S)
    assert found, "the runner section shows no EVALPORT_JUDGE_* example"
    return found.group(1)


def write_pyproject(folder: Path, judge: str = "") -> Path:
    path = folder / "pyproject.toml"
    path.write_text(
        "[tool.evalport]\nrepeat = 1\n" + (f"\n[tool.evalport.judge]\n{judge}" if judge else "")
    )
    return path


async def test_without_a_table_the_judge_comes_from_the_environment(tmp_path) -> None:
    environ = {
        "EVALPORT_JUDGE_MODEL": "env-judge",
        "EVALPORT_JUDGE_BASE_URL": "http://127.0.0.1:9/v1",
        "EVALPORT_JUDGE_API_KEY_ENV": "",
        "EVALPORT_JUDGE_CACHE_DIR": str(tmp_path / "verdicts"),
    }
    judge = build_judge(load_settings(tmp_path), environ)
    assert isinstance(judge, OpenAIJudge)
    try:
        assert (judge.model, judge.base_url, judge._chat.api_key_env) == (
            "env-judge",
            "http://127.0.0.1:9/v1",
            None,
        )
        assert judge.cache is not None and judge.cache.directory == tmp_path / "verdicts"
    finally:
        await judge.aclose()
    assert build_judge(Settings(), {}) is None  # neither: no judge, nothing evaluated


async def test_the_table_wins_and_carries_its_cache_relative_to_the_file(tmp_path) -> None:
    write_pyproject(tmp_path, 'model = "toml-judge"\napi-key-env = ""\njudge-cache = "verdicts"\n')
    (tmp_path / "evals").mkdir()
    settings = load_settings(tmp_path / "evals")  # found from a subfolder: still the file's
    judge = build_judge(settings, {"EVALPORT_JUDGE_MODEL": "env-judge"})
    try:
        assert judge.model == "toml-judge" and judge._chat.api_key_env is None
        assert judge.cache.directory == tmp_path / "verdicts"
    finally:
        await judge.aclose()
    write_pyproject(tmp_path, 'model = "toml-judge"\n')
    judge = build_judge(load_settings(tmp_path), {})
    try:  # no api-key-env: the default variable; no judge-cache: no cache
        assert judge._chat.api_key_env == "OPENAI_API_KEY" and judge.cache is None
    finally:
        await judge.aclose()


def test_a_table_without_a_model_is_an_error_naming_file_and_keys(tmp_path) -> None:
    path = write_pyproject(tmp_path, 'judge-cache = "verdicts"\nbase-url = "http://x/v1"\n')
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path)
    message = str(raised.value)
    assert str(path) in message and "[tool.evalport.judge]" in message
    assert "sets base-url, judge-cache but no model; add model" in message
    write_pyproject(tmp_path, 'model = ""\n')
    with pytest.raises(ConfigError, match="has an empty model"):
        load_settings(tmp_path)
    write_pyproject(tmp_path, 'model = "m"\njudge-cahce = "x"\n')
    with pytest.raises(ConfigError, match="judge-cahce"):
        load_settings(tmp_path)


def run_twice(tmp_path: Path, monkeypatch, chat: FakeChatServer, args: list[str]) -> list[dict]:
    """Two runs of the suite; the judge is scripted for one call only."""
    chat.reset(verdict(0.9, "friendly and offers help"))
    (tmp_path / "evals").mkdir(exist_ok=True)
    (tmp_path / "evals" / "greeting_eval.py").write_text(textwrap.dedent(SUITE))
    monkeypatch.chdir(tmp_path)
    summaries = []
    for attempt in ("first", "second"):
        out = f"{attempt}.json"
        assert main([*args, "--json", out, "--out", f"run-{attempt}"]) == 0, attempt
        summaries.append(json.loads((tmp_path / out).read_text()))
    assert len(chat.requests) == 1  # the second run's verdict came from the cache
    return summaries


@pytest.mark.e2e
def test_readme_environment_example_runs_and_caches(tmp_path, monkeypatch, capsys) -> None:
    words = shlex.split(readme_env_example().replace("\\\n", " "))
    env = dict(word.split("=", 1) for word in words if re.match(r"^EVALPORT_JUDGE_\w+=", word))
    command = [word for word in words if not re.match(r"^EVALPORT_JUDGE_\w+=", word)]
    assert command[:2] == ["evalport", "run"] and env["EVALPORT_JUDGE_API_KEY_ENV"] == ""
    assert set(env) == {
        "EVALPORT_JUDGE_MODEL",
        "EVALPORT_JUDGE_BASE_URL",
        "EVALPORT_JUDGE_API_KEY_ENV",
        "EVALPORT_JUDGE_CACHE_DIR",
    }
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    chat = FakeChatServer()
    with running_server(chat.app) as url:
        env["EVALPORT_JUDGE_BASE_URL"] = f"{url}/v1"  # the fake server, not Ollama
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        first, second = run_twice(tmp_path, monkeypatch, chat, command[1:])
    capsys.readouterr()
    assert "authorization" not in chat.headers[0]  # API_KEY_ENV empty: no key sent
    assert first["provenance"]["judge_model"] == "llama3.1:8b"
    assert [s["counts"]["passed"] for s in (first, second)] == [1, 1]
    assert any((tmp_path / env["EVALPORT_JUDGE_CACHE_DIR"]).rglob("*"))


@pytest.mark.e2e
def test_pyproject_judge_cache_serves_the_second_run(tmp_path, monkeypatch, capsys) -> None:
    for name in [n for n in os.environ if n.startswith("EVALPORT_JUDGE_")]:
        monkeypatch.delenv(name)
    chat = FakeChatServer()
    with running_server(chat.app) as url:
        write_pyproject(
            tmp_path,
            f'model = "fake-judge"\nbase-url = "{url}/v1"\napi-key-env = "FAKE_JUDGE_KEY"\n'
            'judge-cache = "verdicts"\n',
        )
        monkeypatch.setenv("FAKE_JUDGE_KEY", "judge-key-0123456789")
        first, second = run_twice(tmp_path, monkeypatch, chat, ["run", "evals", "--local", AGENT])
    capsys.readouterr()
    assert chat.headers[0]["authorization"] == "Bearer judge-key-0123456789"
    assert [s["counts"]["passed"] for s in (first, second)] == [1, 1]
    assert any((tmp_path / "verdicts").rglob("*"))


JUDGED_TEST = """
async def test_helpful(evalport):
    await evalport.send("hello")
    evalport.judge().helpfulness().gate().at_least(0.8)
"""


@pytest.mark.e2e
def test_the_pytest_plugin_falls_back_to_the_environment(tmp_path) -> None:
    (tmp_path / "test_judged.py").write_text(textwrap.dedent(JUDGED_TEST))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    chat = FakeChatServer()
    chat.reset(verdict(0.5, "vague"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EVALPORT_JUDGE_")}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--evalport-local",
        AGENT,
    ]
    with running_server(chat.app) as url:
        done = subprocess.run(
            command,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env={
                **clean,
                "EVALPORT_JUDGE_MODEL": "env-judge",
                "EVALPORT_JUDGE_BASE_URL": f"{url}/v1",
                "EVALPORT_JUDGE_API_KEY_ENV": "",
            },
        )
    output = done.stdout + done.stderr
    assert len(chat.requests) == 1, output
    assert chat.requests[0]["model"] == "env-judge"
    assert "1 failed in" in output, output  # the judged gate (0.50 < 0.8) fails the test
    assert "helpfulness" in output and "(score 0.50)" in output


async def test_agent_loop_makes_the_configured_judge_the_loop_judge(tmp_path) -> None:
    write_pyproject(
        tmp_path,
        'model = "m"\napi-key-env = ""\nagent-loop = true\nmax-steps = 5\njudge-cache = "v"\n',
    )
    judge = build_judge(load_settings(tmp_path), {})
    try:
        assert isinstance(judge, AgentLoopJudge) and judge.model == "m"
        assert (judge.max_steps, judge.max_tokens) == (5, 40_000)
        assert judge.cache is not None and judge.cache.directory == tmp_path / "v"
    finally:
        await judge.aclose()


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('model = "m"\nmax-steps = 5\n', "max-steps bound the agent-loop judge; add agent-loop"),
        ('model = "m"\nagent-loop = true\nmax-tokens = 0\n', "max-tokens must be at least 1"),
    ],
)
def test_agent_loop_settings_that_do_not_fit_are_errors(tmp_path, table, said) -> None:
    path = write_pyproject(tmp_path, table)
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path)
    assert str(path) in str(raised.value) and said in str(raised.value)
