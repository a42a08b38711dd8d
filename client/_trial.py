"""One trial of one case: open a session, run the case, collect, grade, close.

Rule: :func:`run_trial` never raises for what the case or the agent did; a trial's
deadline is applied once (:func:`trial_deadline`). See ARCHITECTURE.md, "A trial".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import AsyncIterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalport.protocol import TracePolicy

from ._asserts import failed_assert
from ._context import EvalContext, RequirementFailed, SkipCase, is_eval_code, shown_path
from ._core import (
    ApprovalPolicy,
    AssertionHandle,
    AssertionResult,
    LoggedSession,
    RunData,
    Session,
    Target,
    TrialResult,
    asserted_nothing,
    failed_turns,
    faults_option,
    left_pending,
    read_conversation,
    trial_verdict,
)
from ._sync_context import SyncEvalContext

if TYPE_CHECKING:
    from ._core import Case


def where(error: BaseException) -> str | None:
    """``file:line in function: source line`` of the statement of eval code that raised
    ``error`` (the innermost frame outside evalport, Python and libraries), or ``None``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if is_eval_code(f.filename)]
    if not frames:
        return None
    frame = frames[-1]
    source = (frame.line or "").strip()
    shown = f"{shown_path(frame.filename)}:{frame.lineno} in {frame.name}"
    return shown + (f": {source}" if source else "")


def _describe(error: BaseException) -> tuple[str, str, str]:
    """Type name, message (with where the eval code raised it) and traceback."""
    text = str(error) or repr(error)
    location = where(error)
    if location:
        text = f"{text} (at {location})"
    return type(error).__name__, text, "".join(traceback.format_exception(error)).rstrip()


class TrialTimedOut(TimeoutError):
    """A trial outlived its limit (unlike a ``TimeoutError`` the case raised itself)."""

    def __init__(self, limit: float) -> None:
        super().__init__(f"timed out after {limit:g}s (the trial was cancelled)")


_BOUNDED: ContextVar[bool] = ContextVar("evalport_trial_bounded", default=False)


@contextlib.asynccontextmanager
async def trial_deadline(limit: float | None) -> AsyncIterator[None]:
    """Cancel the work inside after ``limit`` seconds and raise :class:`TrialTimedOut`.

    A trial's deadline is applied once: inside another (the runner's around the whole
    trial), this one is a no-op."""
    if limit is None or _BOUNDED.get():
        yield
        return
    token = _BOUNDED.set(True)
    scope = asyncio.timeout(limit)
    try:
        async with scope:
            yield
    except TimeoutError:
        if scope.expired():
            raise TrialTimedOut(limit) from None
        raise
    finally:
        _BOUNDED.reset(token)


async def _invoke(case: Case, ctx: EvalContext, limit: float | None) -> None:
    sync: SyncEvalContext | None = None
    try:
        async with trial_deadline(limit):
            if case.messages:
                await ctx.converse(case.messages)
            elif case.user is not None:
                await ctx.simulate(case.user)
            if case.is_async:
                await case.func(*case.arguments(ctx))
                return
            sync = SyncEvalContext(ctx, asyncio.get_running_loop())
            outcome = await asyncio.to_thread(case.func, *case.arguments(sync))
    except (TimeoutError, asyncio.CancelledError):
        if sync is not None:
            sync.cancel()
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
    """Run ``case`` once against ``target`` (ARCHITECTURE.md, "A trial")."""
    started = time.perf_counter()
    try:
        session = await _open(case, target)
    except Exception as exc:
        kind, text, trace = _describe(exc)
        what = "the logged conversation" if case.conversation is not None else "a session"
        return TrialResult(
            case_id=case.id,
            trial=trial,
            verdict=trial_verdict([], error=True),
            error=f"could not open {what}: {text}",
            error_type=kind,
            traceback=trace,
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
        base_dir=_folder_of(case.source),
    )
    ctx.interrupt_policy = case.interrupt_policy
    error: tuple[str, str, str | None] | None = None
    asserted: AssertionResult | None = None
    skip_reason: str | None = None
    limit = case.timeout if case.timeout is not None else timeout
    try:
        try:
            await _invoke(case, ctx, limit)
        except SkipCase as skip:
            skip_reason = skip.reason or "skipped"
        except RequirementFailed:
            pass  # the failed requirement is a registered gate
        except TrialTimedOut as expired:
            error = ("TimeoutError", str(expired), None)
        except AssertionError as exc:  # a plain assert of the case is a failed gate
            asserted = failed_assert(exc)
            if asserted is None:
                error = _describe(exc)
        except Exception as exc:
            error = _describe(exc)
        unawaited = ctx.unawaited_sends()
        if unawaited is not None and error is None and skip_reason is None:
            error = _describe(unawaited)
        results: list[AssertionResult] = []
        for expectation, location in zip(ctx.expectations, ctx.locations, strict=True):
            if isinstance(expectation, AssertionHandle):  # evaluated already: no await needed
                result = expectation.result
            elif error or skip_reason:
                continue
            else:
                try:
                    result = await expectation.resolve()
                except Exception as exc:
                    kind, text, trace = _describe(exc)
                    error = error or (kind, f"resolving an expectation failed: {text}", trace)
                    continue
            result.location = result.location or location
            results.append(result)
        if asserted is not None:
            results.append(asserted)
        if error is None and skip_reason is None:
            error = left_pending(ctx) or asserted_nothing(ctx, results, case.id, case.func)
        if skip_reason is None:
            results += failed_turns(ctx, results)
        run = _plain(ctx)
    finally:
        await _close(ctx)
    return TrialResult(
        case_id=case.id,
        trial=trial,
        verdict=trial_verdict(results, error=error is not None, skipped=skip_reason is not None),
        assertions=tuple(results),
        error=error[1] if error else None,
        error_type=error[0] if error else None,
        traceback=error[2] if error else None,
        skip_reason=skip_reason,
        duration=time.perf_counter() - started,
        session_id=ctx.session_id,
        judges=tuple(ctx.judge_records),
        logs=list(ctx.logs),
        output=ctx.output,
        run=run,
        timings=tuple(ctx.timings),
    )


async def _open(case: Case, target: Target) -> Session:
    if case.conversation is None:
        return await target.open(
            case_id=case.id, description=case.description or None, **faults_option(case.faults)
        )
    inner: Any = target  # the run's trace policy, on the target under the runner's wrappers
    while inner is not None and not isinstance(getattr(inner, "policy", None), TracePolicy):
        inner = getattr(inner, "inner", None)
    policy = inner.policy if inner is not None else None
    return LoggedSession(case.conversation, read_conversation(case.conversation, policy))


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


def _folder_of(source: str) -> Path | None:
    """The folder of the file a case's ``source`` (``file:line``) names, if that is a file
    (code without one, run by ``exec`` or in a notebook, has none: the working directory
    stands in)."""
    path = Path(source.rpartition(":")[0])
    return path.resolve().parent if path.is_file() else None
