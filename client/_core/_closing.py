"""What a case's end adds to its verdict, shared by ``evalport run`` and the pytest
plugin; it reads the context through :class:`Closing` only. Rules: see ARCHITECTURE.md,
"Verdicts".
"""

from __future__ import annotations

import dis
import functools
import inspect
import types
from collections.abc import Iterator
from typing import Any, Protocol

import msgspec
from evalport.protocol import AgentRun

from ._agent_errors import describe_error, run_errors
from ._results import AssertionResult, JudgeRecord
from ._target import Turn

EXPECTS_FAILURE = "failed"
"""The name of ``ctx.failed()``'s result: a case that asserted it expects its agent to fail."""

SAYS_FAILED = frozenset({"succeeded", "no_failed_actions"})
"""Checks of the outcome that, failed, already say that the agent failed."""

CaseError = tuple[str, str, None]


class Closing(Protocol):
    """What the rules read of an eval context."""

    @property
    def run(self) -> AgentRun: ...

    @property
    def failed_turns(self) -> list[Turn]: ...

    @property
    def judge_records(self) -> list[JudgeRecord]: ...


def left_pending(ctx: Closing) -> CaseError | None:
    """``LeftPending`` when the case ended with approvals or interrupts nothing answered."""
    try:
        run = ctx.run
    except Exception:  # no session, or one that cannot report its run
        return None
    waiting = [f"approval of {pending.tool}" for pending in run.pending_approvals]
    waiting += [f"interrupt {pending.kind or pending.id}" for pending in run.pending_interrupts]
    if not waiting:
        return None
    return (
        "LeftPending",
        f"the case ended with {', '.join(waiting)} still pending and nothing decided: "
        "silence is never consent; give the case an approval_policy (or interrupt_policy), "
        "or answer them in the case",
        None,
    )


def failed_turns(ctx: Closing, results: list[AssertionResult]) -> list[AssertionResult]:
    """A failed gate ``turn_failed`` per turn the agent failed, unless the case expected a
    failure (it asserted ``ctx.failed()``)."""
    if any(result.name == EXPECTS_FAILURE for result in results):
        return []
    if any(result.name in SAYS_FAILED and not result.passed for result in results):
        return []  # the case's own check of the outcome failed already, saying why
    return [
        AssertionResult(
            name="turn_failed",
            score=0.0,
            passed=False,
            message=f"turn {turn.index} failed: {_turn_error(turn)} (assert ctx.failed() "
            "if the case expects the agent to fail)",
        )
        for turn in ctx.failed_turns
    ]


def _turn_error(turn: Turn) -> str:
    """The first error the turn recorded, in a line (type, error id, message)."""
    errors = [msgspec.to_builtins(info) for step in turn.steps for info in step.errors]
    if not errors:
        run = turn.run
        data = {"errorDetails": msgspec.to_builtins(run.error_details), "errors": run.errors}
        errors = run_errors(data)[-1:]
    return describe_error(errors[0]) if errors else "the agent recorded no error"


def asserted_nothing(
    ctx: Closing, results: list[AssertionResult], name: str, func: Any
) -> CaseError | None:
    """``AssertedNothing`` when the case ``name`` (its function ``func``) checked nothing:
    no result, no judge, no ``assert`` statement."""
    if results or ctx.judge_records or _holds_assert(func):
        return None
    return (
        "AssertedNothing",
        f"{name} asserted nothing: it made no assertion and called no judge; check the "
        "run (ctx.contains(...), ctx.called_tool(...), ctx.expect(...), a judge) or write "
        "a plain assert in the case",
        None,
    )


def _holds_assert(func: Any) -> bool:
    """Whether the code of ``func`` (or of a function defined inside it) holds an
    ``assert`` statement that can fail: ``assert (cond, "msg")`` tests a tuple, which is
    always true, and is no check."""
    return any(
        "AssertionError" in code.co_names  # pytest rewrites asserts to raise it
        or _can_fail(list(dis.get_instructions(code)))
        for code in _codes(func)
    )


_BEFORE_RAISE = frozenset({"TO_BOOL", "NOT_TAKEN", "EXTENDED_ARG", "CACHE"})


def _can_fail(ops: list[dis.Instruction]) -> bool:
    """Whether an ``assert`` among ``ops`` tests something other than a non-empty tuple."""
    for index, op in enumerate(ops):
        if op.opname != "LOAD_ASSERTION_ERROR":
            continue
        back = index - 1  # past the jump over the raise (and 3.12+'s TO_BOOL before it)
        while back >= 0 and (ops[back].opname in _BEFORE_RAISE or "JUMP" in ops[back].opname):
            back -= 1
        tested = ops[back] if back >= 0 else None
        always = tested is not None and (
            (tested.opname == "BUILD_TUPLE" and bool(tested.arg))
            or (
                tested.opname == "LOAD_CONST"
                and isinstance(tested.argval, tuple)
                and bool(tested.argval)
            )
        )
        if not always:
            return True
    return False


def uses_names(func: Any, names: frozenset[str]) -> bool:
    """Whether the code of ``func`` (or of a function defined inside it) uses one of
    ``names`` (a global, an attribute or a method: ``ctx.first_token_within``)."""
    return any(not names.isdisjoint(code.co_names) for code in _codes(func))


def _codes(func: Any) -> Iterator[types.CodeType]:
    """The code of ``func`` (a function, a partial, a callable instance) and of every
    function defined inside it."""
    while isinstance(func, functools.partial):
        func = func.func
    call = getattr(func, "__call__", None)  # noqa: B004 - a callable instance's method
    code = getattr(inspect.unwrap(func), "__code__", None) or getattr(call, "__code__", None)
    pending = [code] if isinstance(code, types.CodeType) else []
    while pending:
        code = pending.pop()
        yield code
        pending += [const for const in code.co_consts if isinstance(const, types.CodeType)]
