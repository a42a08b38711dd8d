"""Every code block of the documentation's `judges` section runs here."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path

from evalport.client import ScriptedUser, SimulatedUser, Verdict
from evalport.client._core._results import trial_verdict
from evalport.client.judges import FakeJudge, JudgeAssertions, OpenAIJudge
from evalport.protocol import AgentRun
from evalport.protocol._cli import main as evalport_main
from judge_fake_server import FakeChatServer, verdict
from judge_host import Host
from support.docs import docs_text

README = Path(__file__).parents[3] / "README.md"


def _blocks(language: str) -> list[str]:
    text = docs_text()
    section = text.split("<!-- section:judges -->")[1].split("<!-- /section:judges -->")[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


class CaseContext(Host):
    """Just enough of an eval context to run the README's case."""

    async def send(self, message: str) -> None:
        run = AgentRun(
            reply="Please confirm the order number first.",
            user_messages=[*self.run.user_messages, message],
            turns=self.run.turns + 1,
            status="completed",
        )
        self.add_turn(message, run)

    def judge(self, judge=None) -> JudgeAssertions:
        return JudgeAssertions(self, judge)


def test_there_are_blocks_to_test() -> None:
    assert len(_blocks("python")) == 4 and len(_blocks("json")) == 1 and len(_blocks("bash")) == 1


async def test_case_example_runs_with_a_fake_judge() -> None:
    namespace: dict = {}
    exec(_blocks("python")[0], namespace)
    judge = FakeJudge([0.8, 1.0, 1.0, 0.0, 1.0])
    context = CaseContext(judge)
    await namespace["refund_policy"](context)
    assert judge.calls == 0  # nothing judged yet: lazy
    results = [await expectation.resolve() for expectation in context.registered]
    assert [r.name for r in results] == ["judge.closed_qa", "judge.task_completion", "judge.custom"]
    assert [r.severity for r in results] == ["soft", "gate", "soft"]
    assert [r.passed for r in results] == [True, True, True]  # majority of 1.0, 0.0, 1.0
    assert judge.requests[1].transcript is not None
    assert trial_verdict(results) == Verdict.PASSED


async def test_openai_judge_example(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(_blocks("python")[1], namespace)
    judge = namespace["judge"]
    assert isinstance(judge, OpenAIJudge) and judge.model == "llama3.1:8b"
    assert judge.base_url == "http://127.0.0.1:11434/v1"
    await judge.aclose()


async def test_simulated_user_and_fakes_examples() -> None:
    namespace: dict = {}
    exec(_blocks("python")[2], namespace)
    user = namespace["user"]
    assert isinstance(user, SimulatedUser) and user.max_turns == 6
    await user.aclose()
    exec(_blocks("python")[3], namespace)
    assert isinstance(namespace["user"], ScriptedUser) and namespace["judge"].calls == 0


async def test_calibrate_example(chat_server: FakeChatServer, tmp_path: Path, capsys) -> None:
    (tmp_path / "labels.jsonl").write_text(_blocks("json")[0])
    argv = shlex.split(_blocks("bash")[0])
    assert argv[:3] == ["evalport", "judge", "calibrate"]
    argv[argv.index("--base-url") + 1] = chat_server.base_url  # the fake server, not Ollama
    argv[3] = str(tmp_path / "labels.jsonl")
    chat_server.reset(verdict(1.0), verdict(0.0))
    code = await asyncio.to_thread(evalport_main, [*argv[1:], "--json", "--concurrency", "1"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kappa"] == 1.0 and report["judged"] == 2
