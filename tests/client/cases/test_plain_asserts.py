"""A plain ``assert`` that fails is a failed check (verdict ``failed``, not ``error``) that
shows the values it compared; ``assert (cond, "msg")``, always true, is no check."""

from __future__ import annotations

import warnings

import pytest
from evalport.client import Verdict, cases_from, eval_case, run_trial
from fake_target import FakeTarget, shop_agent


@pytest.fixture
async def target():
    fake = FakeTarget(shop_agent)
    yield fake
    await fake.aclose()


@pytest.fixture(autouse=True)
def here(tmp_path, monkeypatch) -> None:
    (tmp_path / "evals").mkdir()
    monkeypatch.chdir(tmp_path)


def plain(source: str):
    """A case function in evals/plain_eval.py, compiled outside pytest (whose rewriting
    changes asserts)."""
    with open("evals/plain_eval.py", "w") as file:
        file.write(source)
    scope: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        exec(compile(source, "evals/plain_eval.py", "exec"), scope)
    return scope["case"]


async def test_a_failed_plain_assert_is_failed_with_the_compared_values(target) -> None:
    func = plain(
        "async def case(ctx):\n"
        "    turn = await ctx.send('hello')\n"
        "    expected = 'Goodbye'\n"
        "    assert turn.reply == expected\n"
    )
    result = await run_trial(cases_from(eval_case(id="compares")(func))[0], target)
    assert result.verdict == Verdict.FAILED, (result.error, result.assertions)
    (failed,) = [a for a in result.assertions if not a.passed]
    assert failed.name == "assert" and failed.severity == "gate"
    assert "turn.reply == expected" in failed.message
    assert "'Goodbye'" in failed.message and "turn.reply is '" in failed.message
    assert failed.location == "evals/plain_eval.py:4"


async def test_an_assert_with_its_own_message_keeps_it(target) -> None:
    func = plain(
        "async def case(ctx):\n"
        "    await ctx.send('hello')\n"
        "    assert ctx.run.turns == 2, 'two turns expected'\n"
    )
    result = await run_trial(cases_from(eval_case(id="message")(func))[0], target)
    assert result.verdict == Verdict.FAILED
    (failed,) = result.assertions
    assert "two turns expected" in failed.message


async def test_an_always_true_tuple_assert_is_no_check(target) -> None:
    func = plain(
        "async def case(ctx):\n"
        "    await ctx.send('hello')\n"
        "    assert (ctx.run.turns == 2, 'two turns expected')\n"
    )
    result = await run_trial(cases_from(eval_case(id="tuple")(func))[0], target)
    assert result.verdict == Verdict.ERROR
    assert result.error_type == "AssertedNothing"
