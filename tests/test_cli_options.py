"""No evalport command takes an abbreviated option (``--token`` is never ``--token-env``),
and no command echoes a value that may be a secret: an option it does not know, or a
token variable's "name" that is no variable name (a token pasted in its place)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from evalport.protocol._cli import main

SECRET = "s3cr3t-Tok3n/value"
WHERE = {
    "run": ["evals", "--target", "http://127.0.0.1:9"],
    "check": ["http://127.0.0.1:9"],
    "serve": ["agent.py:agent"],
}


@pytest.mark.parametrize("command", sorted(WHERE))
def test_a_prefix_of_an_option_is_refused_and_the_secret_never_shown(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, *WHERE[command], "--token", SECRET])
    captured = capsys.readouterr()
    assert exited.value.code == 2
    assert SECRET not in captured.out + captured.err
    assert "unrecognized option(s) --token (values are not shown)" in captured.err


def test_subcommands_take_no_abbreviations_either(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # taken for --force, it would write evals/weather_eval.py
    with pytest.raises(SystemExit) as exited:
        main(["new", "case", "weather", "--forc"])  # not --force
    assert exited.value.code == 2
    assert not (tmp_path / "evals").exists()


@pytest.mark.parametrize("command", sorted(WHERE))
def test_a_token_variable_that_is_no_variable_name_is_never_echoed(command: str) -> None:
    arguments = [command, *WHERE[command], "--token-env", SECRET]
    done = subprocess.run(
        [sys.executable, "-m", "evalport.protocol._cli", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "--token-env" in done.stderr and "variable" in done.stderr


def test_a_configured_token_variable_that_is_no_name_is_never_echoed() -> None:
    from evalport.client._core import ConfigError
    from evalport.client.cli._targets import read_token

    with pytest.raises(ConfigError) as refused:
        read_token(SECRET, {}, named="[tool.evalport] token-env")
    assert SECRET not in str(refused.value) and "token-env" in str(refused.value)
