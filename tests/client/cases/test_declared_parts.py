"""Declared ``messages=`` take content parts, as ``ctx.send`` does (issue 40 item 9): a
scripted turn is a string or a list of parts (Neuron's ``withTurns`` takes UserMessage
objects carrying images and documents)."""

from __future__ import annotations

import pytest
from evalport.client import EvalContext, LocalTarget, Verdict, cases_from, eval_case, run_trial
from evalport.protocol import ImagePart, TextPart
from evalport.protocol.runtime import TurnContext

GIF = b"GIF89a-tiny"


async def describer(message: str, history: object, ctx: TurnContext) -> str:
    """Says what it received: each part's type."""
    return (
        " | ".join(
            f"text:{part.text}" if isinstance(part, TextPart) else part.media_type or "?"
            for part in ctx.parts
        )
        or f"plain:{message}"
    )


async def test_a_declared_turn_may_be_a_list_of_parts() -> None:
    @eval_case(messages=["hello", ["what is this?", ImagePart(data=GIF, media_type="image/gif")]])
    async def pictured(ctx: EvalContext) -> None:
        assert [turn.message for turn in ctx.turns] == ["hello", "what is this?"]
        ctx.contains("text:what is this? | image/gif")

    async with LocalTarget(describer) as target:
        result = await run_trial(cases_from(pictured)[0], target)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)


def test_a_declared_turn_of_another_type_is_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match="each a string or a list of parts"):
        eval_case(messages=["hello", 42])
    with pytest.raises(TypeError, match="each a string or a list of parts"):
        eval_case(messages=[["caption", object()]])
    with pytest.raises(TypeError, match="list of strings"):
        eval_case(messages="hello")
