"""Messages name the option as the user spelled it (or the config key the value came from),
say it once, and offer what exists (issue 29, item 9)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from evalport.client import EvalContext, Verdict, cases_from, eval_case, run_trial
from evalport.protocol._cli import main
from fake_target import FakeTarget, shop_agent

ROOT = Path(__file__).resolve().parents[3]
AGENT = (ROOT / "examples" / "support_agent.py").as_posix()


@pytest.fixture
async def target():
    fake = FakeTarget(shop_agent)
    yield fake
    await fake.aclose()


def test_the_plugin_names_its_own_token_option_once(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "async def test_a(evalport):\n    await evalport.send('hi')\n"
    )
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    options = ["--evalport-target", "http://127.0.0.1:1", "--evalport-token-env", "NO_SUCH_TOKEN"]
    done = subprocess.run(
        # -rN: no short summary, which repeats the message in full when $CI is set
        [sys.executable, "-m", "pytest", "-q", "-rN", "-p", "no:cacheprovider", *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={key: value for key, value in os.environ.items() if key != "NO_SUCH_TOKEN"},
        timeout=60,
    )
    out = done.stdout
    said = "--evalport-token-env NO_SUCH_TOKEN: the variable is not set"
    assert said in out, out
    assert out.count("the variable is not set") == 1, out  # no chained copy
    assert "--token-env NO" not in out.replace("--evalport-token-env", "")


def test_run_names_the_config_key_a_bad_local_came_from(tmp_path: Path, capsys) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "x_eval.py").write_text(
        "from evalport.client import eval_case\n\n\n"
        "@eval_case\nasync def case(ctx):\n    await ctx.send('hi')\n    ctx.succeeded()\n"
    )
    (tmp_path / "pyproject.toml").write_text(f'[tool.evalport]\nlocal = "{AGENT}:agnet"\n')
    assert main(["run", str(tmp_path / "evals"), "--config", str(tmp_path / "pyproject.toml")]) == 2
    err = capsys.readouterr().err
    assert f"[tool.evalport] local '{AGENT}:agnet'" in err
    assert "did you mean 'agent'?" in err
    assert "--local" not in err
    assert main(["run", str(tmp_path / "evals"), "--local", f"{AGENT}:agnet"]) == 2
    assert f"--local '{AGENT}:agnet'" in capsys.readouterr().err


def test_a_file_named_as_evals_without_a_case_says_what_is_missing(tmp_path: Path, capsys):
    (tmp_path / "weather_eval.py").write_text("def helper(ctx):\n    pass\n")
    assert main(["run", str(tmp_path), "--local", f"{AGENT}:agent"]) == 2
    err = capsys.readouterr().err
    assert "weather_eval.py declares no case" in err and "@eval_case" in err
    assert "are named" not in err  # the file name was right


async def test_awaiting_an_assertion_says_to_drop_the_await(target) -> None:
    @eval_case
    async def awaited(ctx: EvalContext) -> None:
        await ctx.send("hello")
        await ctx.contains("Hello")

    result = await run_trial(cases_from(awaited)[0], target)
    assert result.verdict == Verdict.ERROR
    assert "drop the 'await'" in (result.error or "")
    assert "test_messages_point_the_right_way.py" in (result.error or "")  # its line


async def test_a_number_to_look_for_says_how_to_write_it(target) -> None:
    @eval_case
    async def number(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.contains(18)

    result = await run_trial(cases_from(number)[0], target)
    assert "contains looks for text, not int: write contains('18')" in (result.error or "")


def test_a_case_without_ctx_is_refused_at_its_def() -> None:
    def no_ctx() -> None:
        pass

    with pytest.raises(TypeError, match=r"must take \(ctx\): write 'async def no_ctx\(ctx\):'"):
        eval_case(no_ctx)
    with pytest.raises(TypeError, match=r"must take \(ctx, row\)"):
        eval_case(dataset=[{"q": "hi"}])(lambda ctx: None)


async def test_a_tool_never_called_lists_those_that_were(target) -> None:
    @eval_case
    async def misspelt(ctx: EvalContext) -> None:
        await ctx.send("refund A1 40")
        ctx.called_tool("look")

    result = await run_trial(cases_from(misspelt)[0], target)
    (failed,) = [a for a in result.assertions if not a.passed]
    assert failed.message == (
        "'look' was never called; did you mean 'lookup'? tools called: lookup, refund"
    )


def test_the_hidden_error_message_points_to_a_log_that_exists() -> None:
    from evalport.client._core._agent_errors import HIDDEN

    assert "stderr under --local" in HIDDEN
    assert textwrap.shorten(HIDDEN, 400) == HIDDEN  # one line
