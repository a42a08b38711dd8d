"""Event assertions, on ``AgentRun.events``: seen, satisfying a predicate, in order.
See ARCHITECTURE.md, "The assertion families".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evalport.protocol import Event

from .._core import AssertionResult
from ._base import Assertion, run_of
from ._matchers import VERBATIM_HINT, Count, as_count, as_matcher
from ._sequence import lcs_length


class EventSeen(Assertion):
    kind = "event_seen"
    needs = "events"

    def __init__(
        self,
        name: str,
        *,
        data: Any = None,
        where: Callable[[Event], Any] | None = None,
        count: int | Count | None = None,
    ) -> None:
        self.event = name
        self.data = None if data is None else as_matcher(data)
        self.where = where
        self.count = as_count(count)

    def describe(self) -> str:
        return self.event

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        events = [e for e in run_of(subject, self.kind).events if e.name == self.event]
        if self.where is not None:
            events = [e for e in events if self.where(e)]
        if self.data is None:
            matched, undecided = len(events), 0
        else:
            answers = [self.data.match(e.data) for e in events]
            matched, undecided = answers.count(True), answers.count(None)
        ok = self.count.settle(matched, undecided)
        if ok is None:
            return self.not_evaluable(f"event data of {self.event!r} {VERBATIM_HINT}")
        message = (
            ""
            if ok
            else f"{self.event!r} seen {matched} time(s) matching, expected {self.count.describe()}"
        )
        return self.result(ok, message, seen=len(events), matched=matched)


class EventNotSeen(Assertion):
    kind = "event_not_seen"
    needs = "events"

    def __init__(self, name: str) -> None:
        self.event = name

    def describe(self) -> str:
        return self.event

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        seen = sum(1 for e in run_of(subject, self.kind).events if e.name == self.event)
        return self.result(not seen, f"{self.event!r} seen {seen} time(s)" if seen else "")


class EventsInOrder(Assertion):
    kind = "events_in_order"
    needs = "events"

    def __init__(self, names: Sequence[str]) -> None:
        if isinstance(names, str):
            raise TypeError("events_in_order takes a list of event names")
        self.names = list(names)

    def describe(self) -> str:
        return " > ".join(self.names)

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        actual = [e.name for e in run_of(subject, self.kind).events]
        found = lcs_length(self.names, actual)
        score = found / len(self.names) if self.names else 1.0
        message = ""
        if found < len(self.names):
            message = f"only {found} of {len(self.names)} events in order; seen {actual!r}"
        return self.result(score, message, seen=actual)


class EventsSatisfy(Assertion):
    kind = "events_satisfy"
    needs = "events"

    def __init__(self, predicate: Callable[[list[Event]], Any]) -> None:
        self.predicate = predicate

    def describe(self) -> str:
        return getattr(self.predicate, "__name__", "predicate")

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        events = run_of(subject, self.kind).events
        ok = bool(self.predicate(list(events)))
        return self.result(ok, "" if ok else f"the predicate rejected {len(events)} event(s)")
