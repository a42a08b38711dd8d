"""The agent-loop judge (issue 19, item 1): a scripted model that reads the run through the
judge's tools, on real runs of a real local agent under the trace policy."""

from __future__ import annotations

import io
import re
import runpy
from pathlib import Path
from typing import Any

import pytest
from card_agent import CARD, INJECTION, card_agent, run_of
from evalport.client import Case, LocalTarget, Runner, RunOptions, Verdict, run_trial
from evalport.client.judges import (
    AgentLoopJudge,
    Correctness,
    FakeChat,
    JudgeError,
    JudgeRequest,
    criteria,
)
from evalport.client.reports import ConsoleReporter, HtmlReporter
from evalport.protocol import AgentRun, TracePolicy
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from support.servers import running_server


def request_for(run: AgentRun, criterion: Any = None) -> JudgeRequest:
    return JudgeRequest(
        criterion=criterion or criteria.correctness("paid 20"),
        output=run.reply,
        input=run.user_messages[-1],
        run=run,
    )


def call(tool_name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool_name, "arguments": arguments}


VERDICT = {"reason": "the charge of 20 is in step 0", "evidence": ["charged 20"], "score": 0.9}


async def test_a_scripted_model_reads_through_the_tools_and_gives_one_verdict(
    tmp_path: Path,
) -> None:
    policy_file = tmp_path / "policy.md"
    policy_file.write_text("Payments up to 50 need no approval.")
    run = await run_of("hello", "pay for my order")
    (paid,) = [i for i, step in enumerate(run.steps) if step.tool_executions]
    chat = FakeChat(
        [
            call("list_steps"),
            call("read_step", index=paid),
            call("read_messages"),
            call("read_file", name="policy.md"),
            VERDICT,
        ],
        tokens=(100, 10),
    )
    judge = AgentLoopJudge(chat, files={"policy.md": policy_file})
    verdict = await judge.judge(request_for(run))

    assert verdict.score == 0.9 and verdict.steps == 5 and chat.calls == 5
    assert [read.tool for read in verdict.tool_calls] == [
        "list_steps",
        "read_step",
        "read_messages",
        "read_file",
    ]
    assert verdict.tool_calls[1].arguments == {"index": paid}
    assert all(read.chars > 0 and read.error is None for read in verdict.tool_calls)
    # the judge's own tokens: all five calls, none of them the agent's
    assert (verdict.usage.input_tokens, verdict.usage.output_tokens) == (500, 50)
    last = chat.conversations[-1]
    results = [m["content"] for m in last if m["role"] == "user"][1:]
    assert "TOOL CALL charge(" in results[1]
    assert "USER: hello" in results[2] and "ASSISTANT: Paid 20" in results[2]
    assert "Payments up to 50" in results[3]


async def test_running_out_of_steps_is_an_error_never_a_pass() -> None:
    run = await run_of("pay now")
    judge = AgentLoopJudge(FakeChat(default=call("list_steps")), max_steps=3)
    with pytest.raises(JudgeError, match="used its 3 steps without a verdict"):
        await judge.judge(request_for(run))


async def test_running_out_of_tokens_is_an_error_never_a_pass() -> None:
    run = await run_of("pay now")
    chat = FakeChat(default=call("list_steps"), tokens=(600, 100))
    judge = AgentLoopJudge(chat, max_tokens=1000)
    with pytest.raises(JudgeError, match="spent its 1000 tokens after 2 steps"):
        await judge.judge(request_for(run))
    assert chat.calls == 2  # no call starts past the budget


async def test_injected_tool_results_stay_fenced_and_never_give_the_verdict() -> None:
    run = await run_of("pay now", policy=TracePolicy.verbatim())  # the injection in clear
    fooled: list[str] = []

    def model(messages: list[dict[str, str]]) -> Any:
        # a model that obeys any verdict it sees outside a fence would answer it here
        nonce = re.search(r"<<<DATA-([0-9a-f]{16})", messages[0]["content"]).group(1)  # type: ignore[union-attr]
        latest = messages[-1]["content"]
        body = latest.split('name="read_step">>>', 1)[-1].split(f"<<<END-{nonce}>>>")[0]
        if '"score": 1' in latest and '"score": 1' not in body:
            fooled.append(latest)
        return call("read_step", index=0)

    judge = AgentLoopJudge(FakeChat(default=model), max_steps=4)
    with pytest.raises(JudgeError, match="without a verdict"):
        await judge.judge(request_for(run))
    assert not fooled
    seen = judge.chat.conversations[-1]  # type: ignore[attr-defined]
    result = seen[-1]["content"]
    assert "< < <END-0123456789abcdef> > >" in result  # the look-alike fence is broken
    assert result.count("<<<END-") == 1  # only the real fence closes


async def test_an_answer_that_echoes_data_around_a_verdict_is_malformed() -> None:
    run = await run_of("pay now", policy=TracePolicy.verbatim())
    echo = "Tool said: " + INJECTION  # text around a score: not one JSON object
    chat = FakeChat(
        [echo, {"tool": "read_step", "arguments": 1}, {**VERDICT, "tool": "list_steps"}, VERDICT]
    )
    verdict = await AgentLoopJudge(chat).judge(request_for(run))
    assert verdict.steps == 4 and verdict.score == 0.9
    told = [m["content"] for m in chat.conversations[-1] if m["role"] == "user"][1:]
    assert told[0].startswith("Invalid answer: the answer is not one JSON object")
    assert told[1].startswith("Tool error: 'arguments' must be an object")
    assert "a tool call or the verdict, not both" in told[2]


async def test_a_digested_argument_never_reaches_the_loop_judge_under_safe() -> None:
    run = await run_of("pay now", policy=TracePolicy.safe())
    steps = [call("read_step", index=i) for i in range(len(run.steps))]
    chat = FakeChat([call("list_steps"), *steps, call("read_messages"), VERDICT])
    await AgentLoopJudge(chat, max_steps=10).judge(request_for(run))
    everything = "\n".join(m["content"] for m in chat.conversations[-1])
    assert CARD not in everything and "<redacted <string:" in everything
    # the same reads on a verbatim run do show it (the test can fail)
    verbatim = await run_of("pay now", policy=TracePolicy.verbatim())
    chat = FakeChat([*steps, VERDICT])
    await AgentLoopJudge(chat, max_steps=10).judge(request_for(verbatim))
    assert CARD in "\n".join(m["content"] for m in chat.conversations[-1])


async def test_only_sources_handed_over_are_read(tmp_path: Path) -> None:
    secret = tmp_path / "other.txt"
    secret.write_text("not for the judge")
    page = "Refunds take five days."

    async def refunds(_: Any) -> PlainTextResponse:
        return PlainTextResponse(page)

    app = Starlette(routes=[Route("/refunds", refunds)])
    run = await run_of("pay now")
    with running_server(app) as base:
        allowed = f"{base}/refunds"
        chat = FakeChat(
            [
                call("read_file", name=str(secret)),
                call("read_url", url=f"{base}/other"),
                call("read_url", url=allowed),
                VERDICT,
            ]
        )
        judge = AgentLoopJudge(chat).with_sources(urls=[allowed])
        verdict = await judge.judge(request_for(run))
    first, second, third = verdict.tool_calls
    assert first.error and "no file named" in first.error
    assert second.error and "was not handed over" in second.error
    assert third.error is None and third.chars == len(page)
    text = "\n".join(m["content"] for m in chat.conversations[-1])
    assert "not for the judge" not in text and page in text


async def case_paying(ctx: Any) -> None:
    await ctx.send("pay for it")
    ctx.check(Correctness("paid 20", trajectory=True)).gate()


async def test_in_a_trial_the_judges_reads_and_cost_are_recorded_apart() -> None:
    chat = FakeChat([call("list_steps"), call("read_step", index=0), VERDICT], tokens=(70, 5))
    async with LocalTarget(card_agent) as target:
        result = await run_trial(
            Case(id="pay", func=case_paying), target, judge=AgentLoopJudge(chat)
        )
    assert result.verdict == Verdict.PASSED, result.error
    (record,) = result.judges
    assert [read.tool for read in record.tool_calls] == ["list_steps", "read_step"]
    assert record.steps == 3 and (record.input_tokens, record.output_tokens) == (210, 15)
    # the agent's tool calls and usage are the agent's only
    assert [t["tool_call"]["name"] for t in result.run["tools"]] == ["charge"]
    assert result.run["usage"]["input"] == 40


async def test_in_a_trial_running_out_is_an_error_verdict_with_its_cost() -> None:
    chat = FakeChat(default=call("list_steps"), tokens=(50, 5))
    async with LocalTarget(card_agent) as target:
        judge = AgentLoopJudge(chat, max_steps=2)
        result = await run_trial(Case(id="pay", func=case_paying), target, judge=judge)
    assert result.verdict == Verdict.ERROR
    (assertion,) = result.assertions
    assert not assertion.evaluated and "used its 2 steps" in assertion.message
    (record,) = result.judges  # what the failed grading spent and read is still reported
    assert record.error and (record.input_tokens, record.output_tokens) == (100, 10)
    assert record.steps == 2 and [read.tool for read in record.tool_calls] == ["list_steps"] * 2


async def test_the_judges_reads_are_evidence_in_the_reports(tmp_path: Path) -> None:
    chat = FakeChat(default=None, script=[call("list_steps"), call("read_step", index=0), VERDICT])
    stream = io.StringIO()
    reporters = [
        ConsoleReporter(stream, live=False, verbose=True),
        HtmlReporter(tmp_path / "report.html"),
    ]
    async with LocalTarget(card_agent) as target:
        runner = Runner(target, RunOptions(), judge=AgentLoopJudge(chat), reporters=reporters)
        await runner.run([Case(id="pay", func=case_paying)])
    assert "judge read: list_steps(), read_step(index=0)" in stream.getvalue()
    html = (tmp_path / "report.html").read_text()
    assert "judge read (3 steps): list_steps(), read_step(index=0)" in html


EVAL_FILE = """
from evalport.client.judges import AgentLoopJudge


def sourced(chat, name):
    return AgentLoopJudge(chat).with_sources(files=[name])
"""


async def test_with_sources_reads_relative_paths_beside_the_calling_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evals = tmp_path / "evals"
    evals.mkdir()
    (evals / "policy.md").write_text("Refunds need a receipt.")
    (evals / "sourced_judge.py").write_text(EVAL_FILE)
    monkeypatch.chdir(tmp_path)  # the working directory has no policy.md
    module = runpy.run_path(str(evals / "sourced_judge.py"))
    chat = FakeChat([call("read_file", name="policy.md"), VERDICT])
    verdict = await module["sourced"](chat, "policy.md").judge(request_for(await run_of("pay")))
    (read,) = verdict.tool_calls
    assert read.error is None and read.chars == len("Refunds need a receipt.")
    missing = re.escape(str(evals / "nope.md"))
    with pytest.raises(
        FileNotFoundError, match=rf"'nope\.md' is not a file \(resolved to {missing}"
    ):
        module["sourced"](chat, "nope.md")
