"""One trial of one case: open a session, run the case, collect, grade, close.

Rules:

- The case's session is opened with its tool ``faults`` (if any).
- :func:`run_trial` never raises for anything the case or the agent did: an exception in
  the case (including a wrong assertion subject, an unanswered approval, a failed
  session open) is verdict ``error`` with its type and message; ``ctx.skip`` is
  ``skipped``; ``ctx.require`` that failed is a failed gate. Only cancellation of the
  trial itself propagates (after the sessions are closed).
- An async case function runs on the caller's event loop. A sync one runs in a worker
  thread (``asyncio.to_thread``) with a :class:`~evalport.client.SyncEvalContext`
  whose blocking calls hop back onto the loop.
- The timeout (the case's own, else the one given) bounds the case function. On expiry
  the trial is ``error`` (``TimeoutError``); a sync case's pending calls are cancelled,
  but Python cannot stop a thread that is busy computing.
- Expectations are resolved after the case function returns, in the order they were
  made. Deferred and judged ones run only when the case ended normally or by a failed
  requirement: an errored or skipped case spends no judge tokens.
- The verdict is :func:`evalport.client._results.trial_verdict`. The result keeps the
  logs, the judge records, the current session's id, and its (already redacted) run as
  :class:`~evalport.client.RunData` (plain JSON data, kept encoded).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from ._context import EvalContext, RequirementFailed, SkipCase, SyncEvalContext
from ._conversation import ApprovalPolicy
from ._handles import AssertionHandle
from ._results import AssertionResult, RunData, TrialResult, trial_verdict
from ._target import Target, faults_option

if TYPE_CHECKING:
    from ._cases import Case


def _describe(error: BaseException) -> tuple[str, str]:
    return type(error).__name__, str(error) or repr(error)


class _CaseTimedOut(Exception):
    """The case outlived its limit (unlike a ``TimeoutError`` the case raised itself)."""


async def _invoke(case: Case, ctx: EvalContext, limit: float | None) -> None:
    scope = asyncio.timeout(limit)
    sync: SyncEvalContext | None = None
    try:
        async with scope:
            if case.is_async:
                await case.func(*case.arguments(ctx))
                return
            sync = SyncEvalContext(ctx, asyncio.get_running_loop())
            outcome = await asyncio.to_thread(case.func, *case.arguments(sync))
    except (TimeoutError, asyncio.CancelledError) as error:
        if sync is not None:
            sync.cancel()
        if isinstance(error, TimeoutError) and scope.expired():
            raise _CaseTimedOut from None
        raise
    if asyncio.iscoroutine(outcome):
        outcome.close()
        raise TypeError(f"{case.id}: the case returned a coroutine; declare it 'async def'")


async def run_trial(
    case: Case,
    target: Target,
    *,
    trial: int = 0,
    judge: Any = None,
    strict: bool = False,
    approval_policy: ApprovalPolicy | None = None,
    timeout: float | None = None,
) -> TrialResult:
    """Run ``case`` once against ``target`` (see the module rules)."""
    started = time.perf_counter()
    try:
        session = await target.open(
            case_id=case.id, description=case.description or None, **faults_option(case.faults)
        )
    except Exception as exc:
        kind, text = _describe(exc)
        return TrialResult(
            case_id=case.id,
            trial=trial,
            verdict=trial_verdict([], error=True),
            error=f"could not open a session: {text}",
            error_type=kind,
            duration=time.perf_counter() - started,
        )
    ctx = EvalContext(
        target,
        session,
        case_id=case.id,
        trial=trial,
        case_judge=case.judge if case.judge is not None else judge,
        strict=strict,
        approval_policy=case.approval_policy or approval_policy,
        row=case.row,
    )
    error: tuple[str, str] | None = None
    skip_reason: str | None = None
    limit = case.timeout if case.timeout is not None else timeout
    try:
        try:
            await _invoke(case, ctx, limit)
        except SkipCase as skip:
            skip_reason = skip.reason or "skipped"
        except RequirementFailed:
            pass  # the failed requirement is a registered gate
        except _CaseTimedOut:
            error = ("TimeoutError", f"the case did not finish within {limit:g} s")
        except Exception as exc:
            error = _describe(exc)
        results: list[AssertionResult] = []
        for expectation in ctx.expectations:
            if isinstance(expectation, AssertionHandle):  # evaluated already: no await needed
                results.append(expectation.result)
                continue
            if error or skip_reason:
                continue
            try:
                results.append(await expectation.resolve())
            except Exception as exc:
                kind, text = _describe(exc)
                error = error or (kind, f"resolving an expectation failed: {text}")
        run = _plain(ctx)
    finally:
        await _close(ctx)
    return TrialResult(
        case_id=case.id,
        trial=trial,
        verdict=trial_verdict(results, error=error is not None, skipped=skip_reason is not None),
        assertions=results,
        error=error[1] if error else None,
        error_type=error[0] if error else None,
        skip_reason=skip_reason,
        duration=time.perf_counter() - started,
        session_id=ctx.session_id,
        judges=list(ctx.judge_records),
        logs=list(ctx.logs),
        run=run,
    )


def _plain(ctx: EvalContext) -> RunData | None:
    try:
        return RunData.of(ctx.run)
    except Exception as exc:  # a session that cannot report its run
        ctx.log(f"the run could not be recorded: {exc}")
        return None


async def _close(ctx: EvalContext) -> None:
    for session in ctx.opened:
        try:
            await session.close()
        except Exception as exc:
            ctx.log(f"closing session {session.id} failed: {exc}")
