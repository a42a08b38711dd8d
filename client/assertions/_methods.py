"""The assertion methods of the eval context, one per catalogue entry.

Rules:

- Each method builds the assertion, evaluates it **at once** on the run accumulated so
  far (text assertions on its reply), registers the handle with the context and returns
  it: ``ctx.called_tool("refund").soft()``.
- Assertions that need I/O (``similar_to``) are deferred: the subject is captured now,
  the assertion runs when the case ends (or when the handle is resolved), at most once.
- ``check(assertion, subject=None)`` does the same for any :class:`Assertion`, including
  your own, on the run or on a subject you pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalport.protocol import AgentRun, Event

from .._handles import AssertionHandle, Expectation
from .._results import AssertionResult, Severity
from . import _approvals as approvals
from . import _events as events
from . import _faults as faults
from . import _outcome as outcome
from . import _similarity as similarity
from . import _steps as steps
from . import _text as text
from . import _tools as tools
from ._base import Assertion
from ._expect import ValueEquals, ValueExpectation
from ._matchers import Count

UNSET: Any = tools.UNSET


class DeferredHandle:
    """The handle of an assertion evaluated later, once (same tuning as AssertionHandle)."""

    __slots__ = ("_assertion", "_label", "_result", "_severity", "_subject", "_threshold")

    def __init__(self, assertion: Assertion, subject: Any) -> None:
        self._assertion = assertion
        self._subject = subject
        self._severity: Severity = "gate"
        self._threshold: float | None = None
        self._label: str | None = None
        self._result: AssertionResult | None = None

    def soft(self) -> DeferredHandle:
        self._severity = "soft"
        return self

    def gate(self) -> DeferredHandle:
        self._severity = "gate"
        return self

    def at_least(self, threshold: float) -> DeferredHandle:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        self._threshold = threshold
        return self

    def label(self, text: str) -> DeferredHandle:
        self._label = text
        return self

    async def resolve(self) -> AssertionResult:
        if self._result is None:
            self._result = await self._assertion.aevaluate(self._subject)
        result = self._result
        result.severity = self._severity
        if self._threshold is not None:
            result.threshold = self._threshold
        result.passed = result.evaluated and result.score >= result.threshold
        if self._label is not None:
            result.label = self._label
        return result


def _needs_io(assertion: Assertion) -> bool:
    return type(assertion).aevaluate is not Assertion.aevaluate


class AssertionMethods:
    """Mixed into the eval contexts; they provide ``run`` and ``register``."""

    @property
    def run(self) -> AgentRun:
        raise NotImplementedError

    def register(self, expectation: Expectation) -> None:
        raise NotImplementedError

    def check(
        self, assertion: Assertion | str, subject: Any = None, message: str = ""
    ) -> AssertionHandle | DeferredHandle:
        """Evaluate ``assertion`` on ``subject`` (default: the run so far) and register it.

        Instructor's form ``check(name, passed, message)`` records a plain boolean check.
        """
        if isinstance(assertion, str):
            if not isinstance(subject, bool):
                raise TypeError("check(name, passed, message) takes passed as a bool")
            result = AssertionResult(
                name=assertion, score=float(subject), passed=subject, message=message
            )
            plain = AssertionHandle(result)
            self.register(plain)
            return plain
        if not isinstance(assertion, Assertion):
            raise TypeError(f"check() takes an Assertion, got {type(assertion).__name__}")
        target = self.run if subject is None else subject
        if _needs_io(assertion):
            deferred = DeferredHandle(assertion, target)
            self.register(deferred)
            return deferred
        handle = AssertionHandle(assertion.evaluate(target))
        self.register(handle)
        return handle

    def _reply(self, assertion: Assertion) -> AssertionHandle:
        handle = AssertionHandle(assertion.evaluate(self.run.reply))
        self.register(handle)
        return handle

    def _on_run(self, assertion: Assertion) -> AssertionHandle:
        handle = AssertionHandle(assertion.evaluate(self.run))
        self.register(handle)
        return handle

    # -- text (on the latest reply) -----------------------------------------------------

    def contains(self, needle: str, *, case_sensitive: bool = True) -> AssertionHandle:
        return self._reply(text.Contains(needle, case_sensitive=case_sensitive))

    def contains_all(
        self, needles: Sequence[str], *, case_sensitive: bool = True
    ) -> AssertionHandle:
        return self._reply(text.ContainsAll(needles, case_sensitive=case_sensitive))

    def contains_any(
        self, needles: Sequence[str], *, case_sensitive: bool = True
    ) -> AssertionHandle:
        return self._reply(text.ContainsAny(needles, case_sensitive=case_sensitive))

    def starts_with(self, prefix: str, *, case_sensitive: bool = True) -> AssertionHandle:
        return self._reply(text.StartsWith(prefix, case_sensitive=case_sensitive))

    def ends_with(self, suffix: str, *, case_sensitive: bool = True) -> AssertionHandle:
        return self._reply(text.EndsWith(suffix, case_sensitive=case_sensitive))

    def length_between(self, minimum: int, maximum: int) -> AssertionHandle:
        return self._reply(text.LengthBetween(minimum, maximum))

    def equals(
        self, expected: str, *, case_sensitive: bool = True, strip: bool = False
    ) -> AssertionHandle:
        return self._reply(text.Equals(expected, case_sensitive=case_sensitive, strip=strip))

    def matches_regex(self, pattern: str, flags: int = 0) -> AssertionHandle:
        return self._reply(text.MatchesRegex(pattern, flags))

    def is_valid_json(self) -> AssertionHandle:
        return self._reply(text.IsValidJson())

    def matches_json_schema(self, schema: Mapping[str, Any]) -> AssertionHandle:
        return self._reply(text.MatchesJsonSchema(schema))

    def levenshtein(
        self, reference: str, *, threshold: float = 0.5, max_distance: int | None = None
    ) -> AssertionHandle:
        return self._reply(
            text.LevenshteinDistance(reference, threshold=threshold, max_distance=max_distance)
        )

    def similar_to(
        self, reference: str, embedder: similarity.Embedder, *, threshold: float = 0.8
    ) -> DeferredHandle:
        assertion = similarity.EmbeddingSimilarity(reference, embedder, threshold=threshold)
        deferred = DeferredHandle(assertion, self.run.reply)
        self.register(deferred)
        return deferred

    # -- outcome ------------------------------------------------------------------------

    def succeeded(self) -> AssertionHandle:
        return self._on_run(outcome.Succeeded())

    def stopped(self) -> AssertionHandle:
        return self._on_run(outcome.Stopped())

    def failed(self) -> AssertionHandle:
        return self._on_run(outcome.Failed())

    def stop_reason(self, *reasons: str) -> AssertionHandle:
        return self._on_run(outcome.StopReasonIs(*reasons))

    # -- tools --------------------------------------------------------------------------

    def called_tool(
        self,
        name: str,
        args: Any = None,
        *,
        result: Any = UNSET,
        is_error: bool | None = None,
        count: int | Count | None = None,
    ) -> AssertionHandle:
        return self._on_run(
            tools.CalledTool(name, args, result=result, is_error=is_error, count=count)
        )

    def not_called_tool(self, name: str, args: Any = None) -> AssertionHandle:
        return self._on_run(tools.NotCalledTool(name, args))

    def used_no_tools(self) -> AssertionHandle:
        return self._on_run(tools.UsedNoTools())

    def max_tool_calls(self, limit: int, name: str | None = None) -> AssertionHandle:
        return self._on_run(tools.MaxToolCalls(limit, name))

    def no_failed_actions(self) -> AssertionHandle:
        return self._on_run(tools.NoFailedActions())

    def tool_order(
        self, *names: str | Sequence[str], mode: str = tools.ToolOrderMode.SUBSET
    ) -> AssertionHandle:
        """``tool_order(["a", "b"], mode="strict")``, or Instructor's ``tool_order("a", "b")``
        (subset: in this order, extra calls allowed)."""
        if names and not isinstance(names[0], str):
            if len(names) == 2 and names[1] in tools.ToolOrderMode.ALL:
                mode = str(names[1])
            elif len(names) != 1:
                raise TypeError("tool_order takes one list of names, or the names themselves")
            flat = [str(name) for name in names[0]]
        else:
            flat = [str(name) for name in names]
        return self._on_run(tools.ToolOrder(flat, mode))

    def tool_was_approved(self, name: str, args: Any = None) -> AssertionHandle:
        return self._on_run(approvals.ToolWasApproved(name, args))

    def tool_was_rejected(self, name: str, args: Any = None) -> AssertionHandle:
        return self._on_run(approvals.ToolWasRejected(name, args))

    def tool_was_injected(self, name: str, args: Any = None) -> AssertionHandle:
        return self._on_run(faults.ToolWasInjected(name, args))

    # -- steps and tokens ---------------------------------------------------------------

    def step_count(self, count: int | Count) -> AssertionHandle:
        return self._on_run(steps.StepCount(count))

    def max_steps(self, limit: int) -> AssertionHandle:
        return self._on_run(steps.MaxSteps(limit))

    def total_tokens_at_most(self, limit: int) -> AssertionHandle:
        return self._on_run(steps.TotalTokensAtMost(limit))

    def tokens_at_most(self, kind: str, limit: int) -> AssertionHandle:
        """Budget one kind: ``input``, ``output``, ``cache_write``, ``cache_read``, ``reasoning``."""
        return self._on_run(steps.TokensAtMost(kind, limit))

    # -- events -------------------------------------------------------------------------

    def event_seen(
        self,
        name: str,
        *,
        data: Any = None,
        where: Callable[[Event], Any] | None = None,
        count: int | Count | None = None,
    ) -> AssertionHandle:
        return self._on_run(events.EventSeen(name, data=data, where=where, count=count))

    def event_not_seen(self, name: str) -> AssertionHandle:
        return self._on_run(events.EventNotSeen(name))

    def events_in_order(self, names: Sequence[str]) -> AssertionHandle:
        return self._on_run(events.EventsInOrder(names))

    def events_satisfy(self, predicate: Callable[[list[Event]], Any]) -> AssertionHandle:
        return self._on_run(events.EventsSatisfy(predicate))

    # -- Instructor's names -------------------------------------------------------------

    def message_includes(self, text: str) -> AssertionHandle:
        """Instructor's ``messageIncludes``: :meth:`contains`."""
        return self.contains(text)

    def output_equals(self, expected: Any) -> AssertionHandle:
        """Instructor's ``outputEquals``: the reply equals ``expected`` (or its matcher)."""
        if isinstance(expected, str):
            return self.equals(expected)
        return self._reply(ValueEquals(expected))

    def output_matches(self, pattern: str) -> AssertionHandle:
        """Instructor's ``outputMatches``: :meth:`matches_regex`."""
        return self.matches_regex(pattern)

    def event(
        self,
        name: str,
        predicate: Callable[[Event], Any] | None = None,
        count: int | Count | None = None,
    ) -> AssertionHandle:
        """Instructor's ``event``: :meth:`event_seen` with a predicate over the event."""
        return self.event_seen(name, where=predicate, count=count)

    def not_event(self, name: str) -> AssertionHandle:
        """Instructor's ``notEvent``: :meth:`event_not_seen`."""
        return self.event_not_seen(name)

    def event_order(self, *names: str) -> AssertionHandle:
        """Instructor's ``eventOrder``: :meth:`events_in_order`."""
        return self.events_in_order(list(names))

    def expect(self, value: Any) -> ValueExpectation:
        """Grade any value: ``ctx.expect(x).includes(...).similarity(...).at_least(0.9)``."""
        return ValueExpectation(self, value)
