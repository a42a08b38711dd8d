"""The agent-loop judge's verdicts in the judge cache: a second trial of the same run is
answered with no model call and keeps the recorded reads; a change to anything that
decides the verdict asks the model again; errors are never cached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from card_agent import card_agent, run_of
from evalport.client import Case, LocalTarget, Verdict, run_trial
from evalport.client.judges import (
    AgentLoopJudge,
    Correctness,
    FakeChat,
    JudgeCache,
    JudgeError,
    JudgeRequest,
    criteria,
)
from evalport.protocol import AgentRun

VERDICT = {"reason": "the charge of 20 is in step 0", "evidence": ["charged 20"], "score": 0.9}


def call(tool_name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool_name, "arguments": arguments}


async def paying(ctx: Any) -> None:
    await ctx.send("pay for it")
    ctx.check(Correctness("paid 20", trajectory=True)).gate()


async def test_a_second_trial_makes_no_model_call_and_replays_the_reads(tmp_path: Path) -> None:
    policy = tmp_path / "policy.md"
    policy.write_text("Payments up to 50 need no approval.")
    cache = JudgeCache(tmp_path / "verdicts")
    script = [call("list_steps"), call("read_step", index=0), call("read_file", name=str(policy))]
    records = []
    chats = [FakeChat([*script, VERDICT], tokens=(70, 5)), FakeChat([])]  # the second: no answer
    for chat in chats:
        judge = AgentLoopJudge(chat, cache=cache).with_sources(files=[policy])
        async with LocalTarget(card_agent) as target:  # a new session, new ids and times
            result = await run_trial(Case(id="pay", func=paying), target, judge=judge)
        assert result.verdict == Verdict.PASSED, result.error
        (record,) = result.judges
        records.append(record)
    first, second = records
    assert chats[0].calls == 4 and chats[1].calls == 0
    assert (cache.misses, cache.hits) == (1, 1)
    assert not first.cached and second.cached
    assert [read.tool for read in second.tool_calls] == ["list_steps", "read_step", "read_file"]
    assert second.tool_calls == first.tool_calls and second.steps == first.steps == 4
    assert (first.input_tokens, first.output_tokens) == (280, 20)
    assert (second.input_tokens, second.output_tokens) == (0, 0)  # nothing spent this time


def request_for(run: AgentRun, instructions: str = "paid 20") -> JudgeRequest:
    return JudgeRequest(
        criterion=criteria.correctness(instructions),
        output=run.reply,
        input=run.user_messages[-1],
        run=run,
    )


async def test_everything_that_decides_the_verdict_is_in_the_key(tmp_path: Path) -> None:
    source = tmp_path / "policy.md"
    source.write_text("Payments up to 50 need no approval.")
    cache = JudgeCache(tmp_path / "verdicts")
    chat = FakeChat(default=VERDICT)
    other_model = FakeChat(default=VERDICT, model="another-model")
    run = await run_of("pay for my order")
    other_run = await run_of("hello", "pay for my order")

    def loop(**options: Any) -> AgentLoopJudge:
        chosen = options.pop("chat", chat)
        files = options.pop("files", [source])
        urls = options.pop("urls", ["https://example.com/terms"])
        return AgentLoopJudge(chosen, cache=cache, **options).with_sources(files=files, urls=urls)

    await loop().judge(request_for(run))
    await loop().judge(request_for(await run_of("pay for my order")))  # a new run, read alike
    assert (chat.calls, cache.hits) == (1, 1)

    changes = [
        lambda: loop().judge(request_for(run, "paid 30")),  # the criterion
        lambda: loop().judge(request_for(other_run)),  # the run
        lambda: loop(urls=["https://example.com/other"]).judge(request_for(run)),  # a URL
        lambda: loop(max_steps=3).judge(request_for(run)),
        lambda: loop(max_tokens=999).judge(request_for(run)),
        lambda: loop(files=[]).judge(request_for(run)),  # fewer sources
    ]
    for number, change in enumerate(changes, start=2):
        await change()
        assert chat.calls == number
    source.write_text("Payments up to 10 need no approval.")  # the file's contents
    await loop().judge(request_for(run))
    assert chat.calls == len(changes) + 2
    await loop(chat=other_model).judge(request_for(run))  # the model
    assert other_model.calls == 1
    warmer = FakeChat(default=VERDICT, temperature=0.7)  # same model, another temperature
    await loop(chat=warmer).judge(request_for(run))
    assert warmer.calls == 1
    verdict = await loop().judge(request_for(run))  # and the same again is a hit
    assert verdict.cached and chat.calls == len(changes) + 2


async def test_a_judge_error_is_never_cached(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "verdicts")
    chat = FakeChat(default=call("list_steps"))
    judge = AgentLoopJudge(chat, max_steps=2, cache=cache)
    run = await run_of("pay for my order")
    for _ in range(2):
        with pytest.raises(JudgeError):
            await judge.judge(request_for(run))
    assert chat.calls == 4 and not any((tmp_path / "verdicts").rglob("*.json"))


async def test_the_openai_loop_asks_at_its_temperature_and_keys_by_it(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "verdicts")
    run = await run_of("pay for my order")
    keys = set()
    for temperature in (0.0, 0.7):
        judge = AgentLoopJudge.openai("m", api_key_env=None, temperature=temperature, cache=cache)
        assert getattr(judge.chat, "temperature", None) == temperature
        keys.add(judge._key(request_for(run)))
        await judge.aclose()
    assert len(keys) == 2
