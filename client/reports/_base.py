"""The reporter interface, and loading custom reporters named in configuration. A reporter
that raises never stops the run or the other reporters. See ARCHITECTURE.md, "Reporters
and run folders".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalport.protocol.runtime import load_object

from .._core import CaseResult, ConfigError, TrialResult
from ._summary import CaseSummary, Provenance, RunSummary


@dataclass(slots=True)
class RunPlan:
    """What is about to run."""

    cases: int
    trials: int
    provenance: Provenance
    case_ids: list[str] = field(default_factory=list)  # in discovery order


@dataclass(slots=True)
class RunReport:
    """A finished run: its summary and every case's full result (with redacted runs)."""

    summary: RunSummary
    results: list[CaseResult] = field(default_factory=list)

    def case(self, case_id: str) -> tuple[CaseSummary, CaseResult | None]:
        """The summary and the full result of one case."""
        summary = next(case for case in self.summary.cases if case.case_id == case_id)
        result = next((r for r in self.results if r.case_id == case_id), None)
        return summary, result


class Reporter:
    """Base class with no-op hooks; subclass and override what you need."""

    def start(self, plan: RunPlan) -> None:
        """The run is about to start."""

    def trial_done(self, trial: TrialResult) -> None:
        """One trial finished."""

    def case_done(self, result: CaseResult, summary: CaseSummary) -> None:
        """Every trial of one case finished."""

    def finish(self, report: RunReport) -> None:
        """The run finished; write files here."""


class Reporters:
    """Calls every reporter's hooks; one failing reporter does not stop the others."""

    def __init__(self, reporters: Sequence[object] = ()) -> None:
        self.reporters = list(reporters)
        self.errors: list[str] = []

    def _call(self, hook: str, *args: Any) -> None:
        for reporter in self.reporters:
            method = getattr(reporter, hook, None)
            if method is None:
                continue
            try:
                method(*args)
            except Exception as error:
                name = type(reporter).__name__
                self.errors.append(
                    f"reporter {name}.{hook} failed: {type(error).__name__}: {error}"
                )

    def start(self, plan: RunPlan) -> None:
        self._call("start", plan)

    def trial_done(self, trial: TrialResult) -> None:
        self._call("trial_done", trial)

    def case_done(self, result: CaseResult, summary: CaseSummary) -> None:
        self._call("case_done", result, summary)

    def finish(self, report: RunReport) -> None:
        self._call("finish", report)


def load_reporter(
    spec: str | Mapping[str, Any], factory: Callable[[type], Any] | None = None
) -> object:
    """Build a reporter from ``"module:Name"`` or ``{"use": "module:Name", **kwargs}``;
    ``factory(cls)`` builds a class named without keyword arguments when given."""
    if isinstance(spec, str):
        target, options = spec, {}
    else:
        options = {key.replace("-", "_"): value for key, value in spec.items() if key != "use"}
        target = spec.get("use", "")
    if not isinstance(target, str) or ":" not in target:
        raise ConfigError(
            f"reporter {spec!r}: name it as 'package.module:Name' "
            "(a string, or a table with use = 'package.module:Name')"
        )
    try:  # resolved as --local is: a module from the folder run in, or a file's path
        named = load_object(target)
    except (ValueError, ImportError) as error:
        raise ConfigError(f"reporter {target!r}: {error}") from None
    if not callable(named):
        raise ConfigError(f"reporter {target!r}: {target.partition(':')[2]!r} is not callable")
    try:
        if factory is not None and isinstance(named, type) and not options:
            reporter = factory(named)
        else:
            reporter = named(**options)
    except TypeError as error:
        raise ConfigError(
            f"reporter {target!r}: cannot build it with {options}: {error} (give its "
            "arguments in a table, or build it with the project's factory)"
        ) from None
    if not any(hasattr(reporter, hook) for hook in ("start", "trial_done", "case_done", "finish")):
        raise ConfigError(
            f"reporter {target!r}: has none of the hooks start, trial_done, case_done, finish"
        )
    return reporter


def agent_label(target: Mapping[str, Any]) -> str:
    """The agent as every report names it: its name and version, or ``name, unversioned``
    when it declares none (``/health`` then says ``0``)."""
    name = str(target.get("agent_name") or "?")
    version = str(target.get("agent_version") or "0")
    return f"{name}, unversioned" if version == "0" else f"{name} {version}"
