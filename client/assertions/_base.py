"""The assertion contract (``Assertion``, ``AssertionResult``) and the helpers every family
shares. An assertion never raises for a fact about the agent, only for a subject of the
wrong type; one it cannot evaluate never passes. See ARCHITECTURE.md, "The assertion
contract".
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar

from evalport.protocol import AgentRun

from .._core import AssertionResult, Trajectory, TrajectoryToolCall, Turn
from ._matchers import VERBATIM_HINT, as_matcher


class AssertionTypeError(TypeError):
    """An assertion was given a subject it cannot read (a bug in the eval)."""


def run_of(subject: Any, assertion: str) -> AgentRun:
    """The run behind ``subject``, or :class:`AssertionTypeError`."""
    if isinstance(subject, AgentRun):
        return subject
    if isinstance(subject, Turn | Trajectory):
        return subject.run
    raise AssertionTypeError(
        f"{assertion} evaluates an AgentRun, a Turn or a Trajectory, got {type(subject).__name__}"
    )


TEXTS = (str, AgentRun, Turn, Trajectory)
"""What text assertions read: a string, or the reply of a run, turn or trajectory."""


def text_of(subject: Any, assertion: str) -> str:
    """The text behind ``subject``: itself, a reply, or a final answer."""
    if isinstance(subject, str):
        return subject
    if isinstance(subject, AgentRun | Turn):
        return subject.reply
    if isinstance(subject, Trajectory):
        return subject.final_answer
    raise AssertionTypeError(
        f"{assertion} evaluates text (a str, an AgentRun, a Turn or a Trajectory), "
        f"got {type(subject).__name__}"
    )


class Assertion:
    """Base class: subclasses set ``kind`` and implement :meth:`evaluate`."""

    kind: ClassVar[str] = "assertion"
    needs: ClassVar[str] = ""
    """What of a run it reads that a protocol may not carry (one of
    :data:`~evalport.protocol.UNREPORTABLE`): on a run without it, not evaluable."""
    threshold: float = 1.0

    def evaluate(self, subject: Any) -> AssertionResult:
        raise NotImplementedError

    async def aevaluate(self, subject: Any) -> AssertionResult:
        """Evaluate from async code; assertions that need I/O override this."""
        return self.evaluate(subject)

    @functools.cached_property  # cached: 13% off the 30 of benchmarks/assertions.py
    def name(self) -> str:
        """How the assertion appears in reports, e.g. ``called_tool(refund)``."""
        detail = self.describe()
        return f"{self.kind}({detail})" if detail else self.kind

    def describe(self) -> str:
        """The short argument summary shown in :attr:`name`."""
        return ""

    def result(
        self,
        score: float | bool,
        message: str = "",
        **context: Any,
    ) -> AssertionResult:
        """A result graded against this assertion's threshold."""
        value = min(max(float(score), 0.0), 1.0)
        return AssertionResult(
            name=self.name,
            score=value,
            passed=value >= self.threshold,
            message=message,
            threshold=self.threshold,
            context=context,
        )

    def not_evaluable(self, message: str, **context: Any) -> AssertionResult:
        """A result for an assertion that could not be evaluated; it never passes."""
        return AssertionResult(
            name=self.name,
            score=0.0,
            passed=False,
            message=message,
            threshold=self.threshold,
            evaluated=False,
            context=context,
        )

    def unreported(self, subject: Any) -> AssertionResult | None:
        """The not-evaluable result when the run behind ``subject`` does not carry what
        this assertion :attr:`needs` (an A2A run has no tool calls), else ``None``."""
        why = run_of(subject, self.kind).not_reported(self.needs) if self.needs else ""
        return self.not_evaluable(f"{self.kind}: {why}") if why else None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class StringAssertion(Assertion):
    """Base class of a custom text assertion: implement :meth:`evaluate_string`.

    The subject is read as text assertions read it (a ``str``, or the reply of a run,
    turn or trajectory); anything else raises :class:`AssertionTypeError`.
    """

    kind: ClassVar[str] = "string_assertion"

    def evaluate(self, subject: Any) -> AssertionResult:
        return self.evaluate_string(text_of(subject, self.kind))

    def evaluate_string(self, text: str) -> AssertionResult:
        """The result for ``text``; build it with :meth:`result`."""
        raise NotImplementedError(f"{type(self).__name__} must implement evaluate_string(text)")


class TrajectoryAssertion(Assertion):
    """Base class of a custom assertion on what the agent did: implement
    :meth:`evaluate_trajectory`.

    The subject is an :class:`~evalport.protocol.AgentRun`, a
    :class:`~evalport.client.Turn` or a :class:`~evalport.client.Trajectory`, read as
    the trajectory of its run; anything else raises :class:`AssertionTypeError`.
    """

    kind: ClassVar[str] = "trajectory_assertion"

    def evaluate(self, subject: Any) -> AssertionResult:
        if isinstance(subject, Trajectory):
            return self.evaluate_trajectory(subject)
        return self.evaluate_trajectory(Trajectory.of(run_of(subject, self.kind)))

    def evaluate_trajectory(self, trajectory: Trajectory) -> AssertionResult:
        """The result for ``trajectory``; build it with :meth:`result`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_trajectory(trajectory)"
        )


class ToolCallsAssertion(Assertion):
    """Base class of assertions about the calls of one tool, optionally only those whose
    arguments match ``args`` (a matcher, or a plain mapping compared as a subset)."""

    needs = "tools"

    def __init__(self, name: str, args: Any = None) -> None:
        self.tool = name
        self.args = None if args is None else as_matcher(args)

    def describe(self) -> str:
        return self.tool if self.args is None else f"{self.tool}, {self.args.describe()}"

    def calls(self, subject: Any) -> Sequence[TrajectoryToolCall]:
        """The calls of the tool in ``subject`` (a run, a turn or a trajectory)."""
        return Trajectory.of(run_of(subject, self.kind)).calls_of(self.tool)

    def matching(
        self, subject: Any
    ) -> tuple[Sequence[TrajectoryToolCall], list[TrajectoryToolCall], int]:
        """The tool's calls, those whose arguments match ``args``, and how many calls
        could not be read (a predicate on redacted arguments)."""
        calls = self.calls(subject)
        answers = [True if self.args is None else self.args.match(c.arguments) for c in calls]
        matching = [call for call, answer in zip(calls, answers, strict=True) if answer]
        return calls, matching, answers.count(None)

    def unmatched(
        self,
        calls: Sequence[TrajectoryToolCall],
        matching: list[TrajectoryToolCall],
        undecided: int,
    ) -> AssertionResult | None:
        """The result when no matching call can be examined (none read, none made, none
        matched), else ``None``."""
        if undecided:
            return self.not_evaluable(f"calls of {self.tool!r}: the matcher {VERBATIM_HINT}")
        if not calls:
            return self.result(False, f"{self.tool!r} was never called")
        if not matching:
            return self.result(False, f"no call of {self.tool!r} matched the arguments")
        return None
