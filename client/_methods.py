"""The assertion methods of the eval context, one per catalogue entry, each a
:class:`Delegate` of its class so that a signature lives once. See ARCHITECTURE.md, "The
eval context".
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, Final, Generic, ParamSpec, TypeVar, cast, overload

from evalport.protocol import AgentRun, Event

from . import assertions
from ._core import AssertionHandle, AssertionResult, DeferredHandle, Expectation, TurnTiming
from .assertions import Assertion, Count, Equals, ValueExpectation
from .judges import JudgeCheck, JudgeExpectation, JudgeHost

P = ParamSpec("P")
H = TypeVar("H", bound="AssertionHandle | DeferredHandle")


def _needs_io(assertion: Assertion) -> bool:
    return type(assertion).aevaluate is not Assertion.aevaluate


def _on_reply(ctx: AssertionMethods, assertion: Assertion) -> AssertionHandle:
    handle = AssertionHandle(assertion.evaluate(ctx.sent_run().reply))
    ctx.register(handle)
    return handle


def _on_run(ctx: AssertionMethods, assertion: Assertion) -> AssertionHandle:
    result = assertion.evaluate(ctx.sent_run())
    _flag_undeclared(ctx, assertion, result)
    handle = AssertionHandle(result)
    ctx.register(handle)
    return handle


def _flag_undeclared(ctx: AssertionMethods, assertion: Assertion, result: AssertionResult) -> None:
    """Flag an assertion about a tool the agent does not declare (see ARCHITECTURE.md, "The eval context")."""
    tool = getattr(assertion, "tool", None)
    identity = getattr(getattr(ctx, "target", None), "identity", None)
    declared = getattr(identity, "tools", None)
    if not isinstance(tool, str) or declared is None or tool in declared:
        return
    shown = ", ".join(declared) or "none"
    note = f"{tool!r} is not among the tools the agent declares ({shown}): a typo?"
    result.message = f"{result.message}; {note}" if result.message else note
    result.context["undeclared_tool"] = tool
    log = getattr(ctx, "log", None)
    if callable(log):
        log(f"{result.name}: {note}")


def _on_timings(ctx: AssertionMethods, assertion: Assertion) -> AssertionHandle:
    ctx.sent_run()
    handle = AssertionHandle(assertion.evaluate(ctx.timings))
    ctx.register(handle)
    return handle


def _later_on_reply(ctx: AssertionMethods, assertion: Assertion) -> DeferredHandle:
    deferred = DeferredHandle(assertion, ctx.sent_run().reply)
    ctx.register(deferred)
    return deferred


_SUBJECTS: dict[Callable[..., Any], str] = {
    _on_reply: "on the latest reply, evaluated now",
    _on_run: "on the run so far, evaluated now",
    _on_timings: "on the trial's turn timings so far, evaluated now",
    _later_on_reply: "on the latest reply, evaluated when the case ends (it needs I/O)",
}


class Delegate(Generic[P, H]):
    """A context method that builds ``kind(*args, **kwargs)`` and hands it to ``on``.

    The method takes the class's signature and docstring (``help(ctx.contains)`` shows
    :class:`Contains`'s), and type checkers check its calls against the class.
    """

    def __init__(
        self, kind: Callable[P, Assertion], on: Callable[[AssertionMethods, Assertion], H]
    ) -> None:
        self.kind = kind
        self.on = on
        self.function: Callable[Concatenate[AssertionMethods, P], H] = self._call

    def _call(self, ctx: AssertionMethods, /, *args: P.args, **kwargs: P.kwargs) -> H:
        return self.on(ctx, self.kind(*args, **kwargs))

    def __set_name__(self, owner: type, name: str) -> None:
        call = self._call

        def method(ctx: AssertionMethods, /, *args: P.args, **kwargs: P.kwargs) -> H:
            return call(ctx, *args, **kwargs)

        spec = inspect.signature(self.kind)
        this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        method.__signature__ = spec.replace(  # type: ignore[attr-defined]
            parameters=[this, *spec.parameters.values()],
            return_annotation=self.on.__annotations__.get("return", spec.empty),
        )
        method.__name__ = name
        method.__qualname__ = f"{owner.__qualname__}.{name}"
        method.__module__ = owner.__module__
        title = getattr(self.kind, "__name__", repr(self.kind))
        method.__doc__ = f":class:`{title}` {_SUBJECTS[self.on]}; returns its handle.\n\n" + (
            inspect.getdoc(self.kind) or ""
        )
        self.function = method

    @overload
    def __get__(
        self, ctx: None, owner: type | None = None
    ) -> Callable[Concatenate[AssertionMethods, P], H]: ...

    @overload
    def __get__(self, ctx: AssertionMethods, owner: type | None = None) -> Callable[P, H]: ...

    def __get__(
        self, ctx: AssertionMethods | None, owner: type | None = None
    ) -> Callable[Concatenate[AssertionMethods, P], H] | Callable[P, H]:
        if ctx is None:  # on the class: the plain function, as for any method
            return self.function
        bound: Callable[P, H] = types.MethodType(self.function, ctx)
        return bound


class AssertionMethods:
    """Mixed into the eval contexts; they provide ``run`` and ``register``."""

    @property
    def run(self) -> AgentRun:
        raise NotImplementedError

    def register(self, expectation: Expectation) -> None:
        raise NotImplementedError

    @property
    def timings(self) -> list[TurnTiming]:
        """Each turn's timing so far (:class:`~evalport.client.TurnTiming`), in order."""
        raise NotImplementedError

    def sent_run(self) -> AgentRun:
        """The run assertions read; the eval contexts check first that every send was
        awaited and something was sent."""
        return self.run

    def check(
        self, assertion: Assertion | JudgeCheck | str, subject: Any = None, message: str = ""
    ) -> AssertionHandle | DeferredHandle | JudgeExpectation:
        """Evaluate ``assertion`` on ``subject`` (default: the run so far) and register it.

        A judge object (``Correctness(...)``, ``Custom(...)``) makes the expectation
        ``ctx.judge()`` makes, on ``subject`` (default: the latest reply). Instructor's
        form ``check(name, passed, message)`` records a plain boolean check.
        """
        if isinstance(assertion, JudgeCheck):
            return assertion.expect(cast("JudgeHost", self), subject)
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
            raise TypeError(
                f"check() takes an Assertion or a judge object, got {type(assertion).__name__}"
            )
        target = self.sent_run() if subject is None else subject
        if _needs_io(assertion):
            deferred = DeferredHandle(assertion, target)
            self.register(deferred)
            return deferred
        handle = AssertionHandle(assertion.evaluate(target))
        self.register(handle)
        return handle

    # -- text (on the latest reply) -----------------------------------------------------

    contains = Delegate(assertions.Contains, _on_reply)
    contains_all = Delegate(assertions.ContainsAll, _on_reply)
    contains_any = Delegate(assertions.ContainsAny, _on_reply)
    starts_with = Delegate(assertions.StartsWith, _on_reply)
    ends_with = Delegate(assertions.EndsWith, _on_reply)
    length_between = Delegate(assertions.LengthBetween, _on_reply)
    equals = Delegate(assertions.Equals, _on_reply)
    matches_regex = Delegate(assertions.MatchesRegex, _on_reply)
    is_valid_json = Delegate(assertions.IsValidJson, _on_reply)
    matches_json_schema = Delegate(assertions.MatchesJsonSchema, _on_reply)
    levenshtein = Delegate(assertions.LevenshteinDistance, _on_reply)
    similar_to = Delegate(assertions.EmbeddingSimilarity, _later_on_reply)

    # -- outcome ------------------------------------------------------------------------

    succeeded = Delegate(assertions.Succeeded, _on_run)
    stopped = Delegate(assertions.Stopped, _on_run)
    failed = Delegate(assertions.Failed, _on_run)
    stop_reason = Delegate(assertions.StopReasonIs, _on_run)

    # -- tools --------------------------------------------------------------------------

    called_tool = Delegate(assertions.CalledTool, _on_run)
    not_called_tool = Delegate(assertions.NotCalledTool, _on_run)
    used_no_tools = Delegate(assertions.UsedNoTools, _on_run)
    max_tool_calls = Delegate(assertions.MaxToolCalls, _on_run)
    no_failed_actions = Delegate(assertions.NoFailedActions, _on_run)

    def tool_order(
        self, *names: str | Sequence[str], mode: str = assertions.ToolOrderMode.SUBSET
    ) -> AssertionHandle:
        """``tool_order(["a", "b"], mode="strict")``, or Instructor's ``tool_order("a", "b")``
        (subset: in this order, extra calls allowed)."""
        if names and not isinstance(names[0], str):
            if len(names) == 2 and names[1] in assertions.ToolOrderMode.ALL:
                mode = str(names[1])
            elif len(names) != 1:
                raise TypeError("tool_order takes one list of names, or the names themselves")
            flat = [str(name) for name in names[0]]
        else:
            flat = [str(name) for name in names]
        return _on_run(self, assertions.ToolOrder(flat, mode))

    tool_was_approved = Delegate(assertions.ToolWasApproved, _on_run)
    tool_was_rejected = Delegate(assertions.ToolWasRejected, _on_run)
    interrupted = Delegate(assertions.Interrupted, _on_run)
    tool_was_injected = Delegate(assertions.ToolWasInjected, _on_run)

    # -- steps and tokens ---------------------------------------------------------------

    step_count = Delegate(assertions.StepCount, _on_run)
    max_steps = Delegate(assertions.MaxSteps, _on_run)
    total_tokens_at_most = Delegate(assertions.TotalTokensAtMost, _on_run)
    tokens_at_most = Delegate(assertions.TokensAtMost, _on_run)

    # -- latency ------------------------------------------------------------------------

    turn_within = Delegate(assertions.TurnWithin, _on_run)
    trial_within = Delegate(assertions.TrialWithin, _on_run)
    first_tool_call_within = Delegate(assertions.FirstToolCallWithin, _on_run)
    first_token_within = Delegate(assertions.FirstTokenWithin, _on_timings)
    first_event_within = Delegate(assertions.FirstEventWithin, _on_timings)

    # -- events -------------------------------------------------------------------------

    event_seen = Delegate(assertions.EventSeen, _on_run)
    event_not_seen = Delegate(assertions.EventNotSeen, _on_run)
    events_in_order = Delegate(assertions.EventsInOrder, _on_run)
    events_satisfy = Delegate(assertions.EventsSatisfy, _on_run)

    # -- Instructor's names -------------------------------------------------------------

    def message_includes(self, text: str) -> AssertionHandle:
        """Instructor's ``messageIncludes``: :meth:`contains`."""
        return self.contains(text)

    def output_equals(self, expected: Any) -> AssertionHandle:
        """Instructor's ``outputEquals``: the reply equals ``expected`` (or its matcher)."""
        return _on_reply(self, Equals(expected))

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


TIMING_NAMES: Final = frozenset(
    [
        name
        for attribute, method in vars(AssertionMethods).items()
        if isinstance(method, Delegate) and method.on is _on_timings
        for name in (attribute, getattr(method.kind, "__name__", attribute))
    ]
    + ["timings", "timing"]
)
"""What a case's code names when it reads turn timings, which no recording holds: the
methods on them (``first_token_within``), their classes, ``ctx.timings``, ``Turn.timing``."""
