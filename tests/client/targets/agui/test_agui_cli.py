"""The command line on an AG-UI agent: ``evalport run --target agui+...`` (and the same
URL in ``[tool.evalport] target``), ``evalport check agui+...``, and both without the
``agui`` extra. The agent is pydantic-ai's, served through its ``AGUIAdapter`` on real
uvicorn."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ag_ui.core")
pytest.importorskip("pydantic_ai.ui.ag_ui")

from agui_agents import PATH, agui_app, support_agent
from evalport.client import AgUiTarget
from evalport.protocol import MissingExtraError
from evalport.protocol._cli import main as evalport
from support.servers import running_server

pytestmark = pytest.mark.e2e

EVALS = """
from evalport.client import approve_all, eval_case


@eval_case
async def looks_the_order_up(ctx):
    await ctx.send("where is my order?")
    ctx.called_tool("lookup", {"order_id": "A1"})
    ctx.contains("shipped")
    ctx.max_steps(2)


@eval_case
async def asks_approval_for_a_refund(ctx):
    ctx.approval_policy = approve_all()
    await ctx.send("refund please")
    ctx.tool_was_approved("refund")
"""


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with running_server(agui_app(support_agent())) as base:
        yield base + PATH


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "eval_orders.py").write_text(textwrap.dedent(EVALS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALPORT_TOKEN", raising=False)
    return tmp_path


def test_run_takes_an_agui_target(
    served: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = evalport(["run", "evals", "--target", f"agui+{served}", "--json", "out.json"])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "2 passed" in printed.out


def test_the_config_names_an_agui_target(served: str, project: Path) -> None:
    (project / "pyproject.toml").write_text(f'[tool.evalport]\ntarget = "agui+{served}"\n')
    assert evalport(["run", "evals"]) == 0


def test_check_lists_what_the_target_can_and_cannot_evaluate(
    served: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = evalport(["check", f"agui+{served}", "--message", "where is my order?"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    assert lines[0] == f"AG-UI agent at {served}"
    assert lines[1].startswith("PASS  turn: status completed, 2 step(s), 1 tool call(s)")
    can = [line for line in lines if line.startswith("CAN ")]
    cannot = [line.split(":")[0] for line in lines if line.startswith("CANNOT")]
    assert any("tool calls" in line for line in can) and any("token usage" in line for line in can)
    assert cannot == [
        "CANNOT  attach",
        "CANNOT  delete",
        "CANNOT  deltas",
        "CANNOT  idempotent retries",
        "CANNOT  seeded faults",
        "CANNOT  server-side trace policy",
    ]


def test_check_decides_the_approvals_a_turn_waits_on(
    served: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert evalport(["check", f"agui+{served}", "--message", "refund please"]) == 0
    assert "1 round(s) of approvals decided" in capsys.readouterr().out


def test_check_says_which_usage_an_agent_does_not_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with running_server(agui_app(support_agent(), include_usage=False)) as base:
        assert evalport(["check", f"agui+{base}{PATH}"]) == 0
    out = capsys.readouterr().out
    assert "CANNOT  token usage (tokens_at_most, total_tokens_at_most): this AG-UI agent" in out


def test_an_unreachable_agent_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    from support.servers import free_port

    url = f"agui+http://127.0.0.1:{free_port()}/agent"
    assert evalport(["check", url, "--timeout", "5"]) == 3
    assert "is unreachable" in capsys.readouterr().err


@pytest.fixture
def without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ag_ui`` not installed, as far as this process can tell."""
    for name in [name for name in sys.modules if name == "ag_ui" or name.startswith("ag_ui.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ag_ui", None)
    monkeypatch.delitem(sys.modules, "evalport.client._core.targets._agui_run", raising=False)
    monkeypatch.delitem(sys.modules, "evalport.client._core.targets._agui_wire", raising=False)


def test_without_the_extra_the_target_says_so_in_one_line(without_the_extra: None) -> None:
    with pytest.raises(MissingExtraError) as caught:
        AgUiTarget("http://127.0.0.1:1/agent")
    text = str(caught.value)
    assert "\n" not in text and "pip install 'evalport[agui]'" in text and "'ag_ui'" in text


@pytest.mark.parametrize("command", ["run", "check"])
def test_without_the_extra_the_cli_exits_2(
    without_the_extra: None, project: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "evals", "--target"] if command == "run" else ["check"]
    assert evalport([*argv, "agui+http://127.0.0.1:1/agent"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "pip install 'evalport[agui]'" in line
