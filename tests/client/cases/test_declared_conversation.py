"""A case declares a scripted or a simulated conversation, never both (issue 19, item 12)."""

from __future__ import annotations

import pytest
from evalport.client import (
    EvalContext,
    LocalTarget,
    ScriptedUser,
    Verdict,
    cases_from,
    eval_case,
    run_trial,
)
from fake_target import shop_agent


def test_scripted_and_simulated_together_fail_at_decoration() -> None:
    with pytest.raises(ValueError) as caught:

        @eval_case(messages=["hello"], user=ScriptedUser(["hello"]))
        def both(ctx: EvalContext) -> None: ...

    text = str(caught.value)
    assert "'test_scripted_and_simulated_together_fail_at_decoration.<locals>.both'" in text
    assert "messages=" in text and "user=" in text and "keep one of them" in text


def test_the_error_names_an_explicit_id_and_messages_must_be_a_list() -> None:
    with pytest.raises(ValueError, match="case 'refund-chat'"):
        eval_case(id="refund-chat", messages=["a"], user=ScriptedUser(["b"]))(lambda ctx: None)
    with pytest.raises(TypeError, match="list of strings"):
        eval_case(messages="hello")
    # either one alone is fine
    eval_case(messages=["hello"])(lambda ctx: None)
    eval_case(user=ScriptedUser(["hello"]))(lambda ctx: None)


async def test_declared_conversations_are_played_before_the_body() -> None:
    @eval_case(messages=["hello", "refund A1 40"])
    async def scripted(ctx: EvalContext) -> None:
        assert [turn.message for turn in ctx.turns] == ["hello", "refund A1 40"]
        ctx.called_tool("refund")

    @eval_case(user=ScriptedUser(["hello", "thanks"]))
    def simulated(ctx) -> None:
        assert [turn.message for turn in ctx.turns] == ["hello", "thanks"]
        ctx.contains("You said: thanks")

    async with LocalTarget(shop_agent) as target:
        for func in (scripted, simulated):
            result = await run_trial(cases_from(func)[0], target)
            assert result.verdict == Verdict.PASSED, result.error
