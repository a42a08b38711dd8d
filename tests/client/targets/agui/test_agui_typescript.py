"""AgUiTarget against an AG-UI agent written in TypeScript with the ``@ag-ui/core`` and
``@ag-ui/encoder`` npm packages (``tests/support/agui-ts``), run by ``node`` on a loopback
port: the same script as the pydantic-ai agent of ``agui_agents``, so the same verdicts
as that agent behind evalport's adapter. Skipped only where ``node`` is absent; its
packages are installed by ``npm ci --prefix tests/support/agui-ts``."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ag_ui.core")

from agui_agents import support_agent, verdicts
from evalport.client import AgUiTarget, LocalTarget
from evalport.client.assertions import EventSeen
from evalport.protocol import RunStatus
from evalport.server.adapters import PydanticAIAgent

pytestmark = pytest.mark.e2e

PROJECT = Path(__file__).resolve().parents[3] / "support" / "agui-ts"
NODE = shutil.which("node")


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    if NODE is None:
        pytest.skip("node is not installed")
    compiler = PROJECT / "node_modules" / "typescript" / "bin" / "tsc"
    assert compiler.is_file(), (
        f"{PROJECT} has no node_modules: run `npm ci --prefix {PROJECT}` (as .ci/run does)"
    )
    subprocess.run([NODE, str(compiler), "-p", str(PROJECT)], check=True, timeout=120)
    agent = subprocess.Popen(
        [NODE, str(PROJECT / "dist" / "agent.js"), "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout is not None
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(agent.stdout.readline()))
        reader.start()
        reader.join(30)
        assert first and first[0].startswith("listening on "), first
        yield f"http://127.0.0.1:{int(first[0].split()[-1])}/agent"
    finally:
        agent.terminate()
        try:
            agent.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            agent.kill()
            agent.wait(10)
        if agent.stdout is not None:
            agent.stdout.close()


async def both(url: str, *messages: str, decision: str | None = None) -> tuple[list, list]:
    """The turns of ``messages`` through the TypeScript agent and through the pydantic-ai
    agent behind evalport's adapter; ``decision`` answers a pending approval."""
    turns: tuple[list, list] = ([], [])
    targets = (AgUiTarget(url), LocalTarget(PydanticAIAgent(support_agent())))
    for index, target in enumerate(targets):
        async with target:
            session = await target.open()
            for message in messages:
                turn = await session.send(message)
                if decision is not None and turn.run.pending_approvals:
                    calls = {item.call_id: decision for item in turn.run.pending_approvals}
                    turn = await session.decide(calls)
                turns[index].append(turn)
    return turns


async def test_a_tool_call_and_a_second_turn(served: str) -> None:
    mine, theirs = await both(served, "where is my order?", "what did I ask")
    for one, other in zip(mine, theirs, strict=True):
        assert verdicts(one.run) == verdicts(other.run)
    assert mine[0].reply == "Order A1 is shipped."
    assert mine[1].reply == "You asked: where is my order?"
    assert mine[0].timing is not None and mine[0].timing.first_token is not None


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_an_approval_through_an_interrupt(served: str, decision: str) -> None:
    (mine,), (theirs,) = await both(served, "refund please", decision=decision)
    assert verdicts(mine.run) == verdicts(theirs.run)
    assert mine.run.status == RunStatus.COMPLETED


async def test_a_failed_run(served: str) -> None:
    (mine,), (theirs,) = await both(served, "boom")
    assert verdicts(mine.run, usage=False) == verdicts(theirs.run, usage=False)
    assert mine.run.status == RunStatus.FAILED


async def test_the_agents_state_goes_back_with_the_next_run(served: str) -> None:
    async with AgUiTarget(served) as target:
        session = await target.open()
        first = await session.send("where is my order?")
        assert session.state == {"runs": 1, "last": "looked up"}
        await session.send("hello")
        assert session.state == {"runs": 2, "last": "started"}
    assert EventSeen("state", data={"last": "looked up"}).evaluate(first.run).passed
