"""The runner: every trial of every case, concurrently, each in its own fresh session.

Rule: a trial never stops the run (what it raises is its ``error``); only cancelling the
run does. See ARCHITECTURE.md, "The runner".
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from evalport.protocol import TargetUnavailable, TracePolicy, __version__

from ._core import (
    AttachedTarget,
    CachingTarget,
    CaseResult,
    RateLimitedTarget,
    RunCache,
    Target,
    TrackingTarget,
    TrialResult,
    Verdict,
    case_verdict,
    required_passes,
    uses_names,
)
from ._methods import TIMING_NAMES
from ._trial import TrialTimedOut, trial_deadline
from .reports import (
    CaseSummary,
    Provenance,
    Reporters,
    RunPlan,
    RunReport,
    summarize,
    summarize_case,
)

CLOSE_TIMEOUT = 10.0
"""Seconds to close a session the trial left open after a timeout or an error."""


TrialFunction = Callable[..., Awaitable[TrialResult]]


@dataclass(slots=True)
class RunOptions:
    """How to run; the command line and ``[tool.evalport]`` fill it."""

    repeat: int = 1
    pass_rate: float = 1.0
    concurrency: int = 8
    rps: float | None = None
    timeout: float | None = 120.0
    strict: bool = False
    min_lower_bound: float | None = None
    attach: str | None = None
    shard: str | None = None
    command: list[str] = field(default_factory=list)


def git_sha(folder: str | None = None) -> str | None:
    """The commit checked out in ``folder`` (``GITHUB_SHA`` first), or ``None``."""
    if os.environ.get("GITHUB_SHA"):
        return os.environ["GITHUB_SHA"]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _default_trial_function() -> TrialFunction:
    from ._trial import run_trial

    function: TrialFunction = run_trial
    return function


def _policy_text(policy: object) -> str | None:
    """The target's trace policy as reports state it (``None``: the target has none)."""
    return policy.describe() if isinstance(policy, TracePolicy) else None


def _error_trial(case_id: str, trial: int, error: BaseException, duration: float) -> TrialResult:
    message = str(error) or type(error).__name__
    return TrialResult(
        case_id=case_id,
        trial=trial,
        verdict=Verdict.ERROR,
        error=message,
        error_type=type(error).__name__,
        duration=duration,
    )


class Runner:
    """Runs cases against one target and reports as it goes."""

    def __init__(
        self,
        target: Target,
        options: RunOptions | None = None,
        *,
        judge: Any = None,
        cache: RunCache | None = None,
        reporters: Sequence[object] = (),
        trial_function: TrialFunction | None = None,
    ) -> None:
        self.target = target
        self.options = options or RunOptions()
        self.judge = judge
        self.cache = cache
        self.reporters = Reporters(reporters)
        self.trial_function = trial_function or _default_trial_function()
        self._base: Target = target
        if self.options.rps:
            self._base = RateLimitedTarget(self._base, self.options.rps)
        if self.options.attach:
            if self.options.repeat > 1:
                raise ValueError(
                    f"attach: repeat is {self.options.repeat}, but an attached session holds "
                    "one conversation; every trial after the first would see what the "
                    "earlier ones sent: run it with repeat 1"
                )
            self._base = AttachedTarget(self._base, self.options.attach)

    def provenance(self) -> Provenance:
        identity = self.target.identity
        options = self.options
        return Provenance(
            evalport_version=__version__,
            started_at=_now(),
            git_sha=git_sha(),
            target={
                "kind": identity.kind,
                "location": identity.location,
                "agent_name": identity.agent_name,
                "agent_version": identity.agent_version,
            },
            trace_policy=_policy_text(getattr(self.target, "policy", None)),
            judge_model=getattr(self.judge, "model", None),
            repeat=options.repeat,
            pass_rate=options.pass_rate,
            min_lower_bound=options.min_lower_bound,
            concurrency=options.concurrency,
            strict=options.strict,
            shard=options.shard,
            python=f"{platform.python_implementation()} {platform.python_version()}",
            command=list(options.command or sys.argv),
        )

    async def run(self, cases: Sequence[Any], *, load_errors: Sequence[str] = ()) -> RunReport:
        """Run every trial of every case; returns the report (reporters already called)."""
        options = self.options
        await self._learn_identity()
        provenance = self.provenance()
        started = time.perf_counter()
        self.reporters.start(
            RunPlan(
                cases=len(cases),
                trials=len(cases) * options.repeat,
                provenance=provenance,
                case_ids=[case.id for case in cases],
            )
        )
        # A case's list of trials is made when its first trial ends, not one per case up
        # front: every list is an object the garbage collector walks (issue 36).
        trials: dict[int, list[TrialResult]] = {}
        results: dict[int, CaseResult] = {}
        summaries: dict[int, CaseSummary] = {}
        jobs = iter([(i, trial) for i in range(len(cases)) for trial in range(options.repeat)])

        async def worker() -> None:
            for index, trial in jobs:
                result = await self.run_trial(cases[index], trial)
                done = trials.setdefault(index, [])
                done.append(result)
                self.reporters.trial_done(result)
                if len(done) == options.repeat:
                    del trials[index]
                    results[index], summaries[index] = self._finish_case(cases[index], done)
                    self.reporters.case_done(results[index], summaries[index])

        workers = min(options.concurrency, len(cases) * options.repeat) or 1
        if options.attach:
            workers = 1  # one session: its trials take turns
        with _heap_set_aside():
            async with asyncio.TaskGroup() as group:
                for _ in range(workers):
                    group.create_task(worker())
        provenance.finished_at = _now()
        ordered = range(len(cases))
        summary = summarize(
            [summaries[i] for i in ordered],
            provenance,
            duration=time.perf_counter() - started,
            load_errors=list(load_errors),
        )
        report = RunReport(summary=summary, results=[results[i] for i in ordered])
        self.reporters.finish(report)
        return report

    async def _learn_identity(self) -> None:
        """Ask a target that learns its agent's identity lazily (``HttpTarget`` reads
        ``/health`` on first use) to do it now: provenance and cache keys need it."""
        check = getattr(self.target, "check", None)
        if (
            check is not None
            and getattr(self.target, "health", ...) is None
            and getattr(self.target, "health_check", True)  # the user turned /health off
        ):
            timeout = self.options.timeout
            try:
                async with asyncio.timeout(timeout):
                    await check()
            except TimeoutError:
                raise TargetUnavailable(
                    f"the target did not tell its identity (GET /health) within {timeout:g} s"
                ) from None

    async def run_trial(self, case: Any, trial: int) -> TrialResult:
        """One trial of one case; never raises (except when the run is cancelled). A case
        with a concurrency limit waits for a slot first, outside its timeout."""
        limit = getattr(case, "concurrency", None)
        if limit is None:
            return await self._trial(case, trial)
        async with limit.slot():
            return await self._trial(case, trial)

    async def _trial(self, case: Any, trial: int) -> TrialResult:
        case_id = case.id
        tracking = TrackingTarget(self._base)
        target: Any = tracking
        if (
            self.cache is not None
            and self.options.attach is None
            and getattr(case, "conversation", None) is None
        ):
            # An attached session is inspected, not replayed, and a logged conversation
            # is a file: neither is ever cached.
            target = self.cache.wrap(
                tracking,
                case_id=case_id,
                row=_row(case),
                trial=trial,
                policy=getattr(self.target, "policy", None),
                live=_never_replayed(case),
            )
        timeout = getattr(case, "timeout", None) or self.options.timeout
        started = time.perf_counter()
        close_errors: list[str] | None = None
        # One timeout bounds the whole trial (open, turns, assertions, judges, closing); on
        # expiry the trial's work is cancelled where it waits.
        try:
            async with trial_deadline(timeout):
                try:
                    result = await self.trial_function(
                        case, target, trial=trial, judge=self.judge, strict=self.options.strict
                    )
                    if not isinstance(result, TrialResult):
                        raise TypeError(
                            f"the trial function returned {type(result).__name__}, "
                            "not a TrialResult"
                        )
                    close_errors = await _close(target, tracking)
                except Exception as error:
                    result = _error_trial(case_id, trial, error, time.perf_counter() - started)
        except TrialTimedOut as expired:  # the trial's own errors are caught inside
            result = _error_trial(case_id, trial, expired, time.perf_counter() - started)
            result.error_type = "TimeoutError"
        except asyncio.CancelledError:  # the run itself was cancelled
            await _close(target, tracking, bound=CLOSE_TIMEOUT)
            raise
        if close_errors is None:  # the trial ended early: close what it left open
            close_errors = await _close(target, tracking, bound=CLOSE_TIMEOUT)
        if isinstance(target, CachingTarget):
            result.cached = target.cached
        result.logs.extend(close_errors)
        return result

    def _finish_case(self, case: Any, trials: list[TrialResult]) -> tuple[CaseResult, CaseSummary]:
        trials.sort(key=lambda trial: trial.trial)
        verdicts = [trial.verdict for trial in trials]
        result = CaseResult(
            case_id=case.id,
            description=getattr(case, "description", "") or "",
            tags=tuple(getattr(case, "tags", ()) or ()),
            row=_row_data(_row(case)),
            verdict=case_verdict(verdicts, self.options.pass_rate, self.options.min_lower_bound),
            trials=trials,
            pass_rate=self.options.pass_rate,
            required=required_passes(len(verdicts), self.options.pass_rate),
            passes=verdicts.count(Verdict.PASSED),
        )
        summary = summarize_case(result, min_lower_bound=self.options.min_lower_bound)
        return result, summary


_aside_lock = threading.Lock()
_aside_runs = 0  # runs in progress, in every thread
_aside_ours = False  # whether the first of them froze the heap


@contextlib.contextmanager
def _heap_set_aside() -> Iterator[None]:
    """While cases run, the objects made before them (modules, the suite, the target) are
    set aside from the garbage collector (``gc.freeze``), and given back when the last
    run ends. See ARCHITECTURE.md, "The runner"."""
    global _aside_runs, _aside_ours
    with _aside_lock:
        if _aside_runs == 0:
            _aside_ours = gc.get_freeze_count() == 0  # a process that froze its own keeps it
            if _aside_ours:
                gc.freeze()
        _aside_runs += 1
    try:
        yield
    finally:
        with _aside_lock:
            _aside_runs -= 1
            if _aside_runs == 0 and _aside_ours:
                gc.unfreeze()


async def _close(target: Any, tracking: TrackingTarget, bound: float | None = None) -> list[str]:
    """Close every session of a trial (closing twice is harmless); returns the errors."""
    sessions: list[Any] = list(target.sessions) if isinstance(target, CachingTarget) else []
    sessions += tracking.sessions  # caching sessions first: closing them records what went live
    errors: list[str] = []
    for session in sessions:
        try:
            if bound is None:
                await session.close()
            else:
                async with asyncio.timeout(bound):
                    await session.close()
        except Exception as error:
            errors.append(f"closing session {session.id}: {type(error).__name__}: {error}")
    return errors


def _never_replayed(case: Any) -> str | None:
    """Why a case's trials run live under the cache: its code reads turn timings."""
    func = getattr(case, "func", None)
    if func is not None and uses_names(func, TIMING_NAMES):
        return "it asserts turn timings, which no recording holds: it runs live"
    return None


def _row(case: Any) -> Any:
    for name in ("row", "data", "dataset_row"):
        if hasattr(case, name):
            return getattr(case, name)
    return None


def _row_data(row: Any) -> dict[str, Any] | None:
    """A dataset row as plain data for the reports (rows are user inputs: kept in clear)."""
    if row is None:
        return None
    to_dict = getattr(row, "to_dict", None)
    data = to_dict() if callable(to_dict) else row
    return dict(data) if isinstance(data, Mapping) else None


async def run_cases(
    cases: Sequence[Any],
    target: Target,
    options: RunOptions | None = None,
    **kwargs: Any,
) -> RunReport:
    """Run ``cases`` against ``target`` with a one-off :class:`Runner`."""
    return await Runner(target, options, **kwargs).run(cases)
