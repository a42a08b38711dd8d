"""``ctx.expect(value)``: grade any value pulled out of the run (Instructor's
``ValueExpectation``); each call in the chain records one assertion. See ARCHITECTURE.md,
"The assertion families".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from evalport.protocol import is_digest

from .._core import AssertionHandle, AssertionResult
from ._base import TEXTS, Assertion, text_of
from ._matchers import DIGESTED_HINT, VERBATIM_HINT, EqualTo, has_digest, short, value_matcher
from ._text import LevenshteinDistance, MatchesRegex, _quote, _Text


class Checks(Protocol):
    """What the chain needs of the eval context: its ``check``."""

    def check(self, assertion: Assertion, subject: Any = None) -> object: ...


def _shown(value: Any) -> str:
    if has_digest(value):
        return short(value, 120)
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


class ValueIncludes(Assertion):
    kind = "includes"

    def __init__(self, expected: Any) -> None:
        self.expected = expected

    def describe(self) -> str:
        return _shown(self.expected)

    def evaluate(self, subject: Any) -> AssertionResult:
        if is_digest(subject):  # a redacted value: its keys are the digest's own
            return self.not_evaluable(f"the value {VERBATIM_HINT}")
        if isinstance(subject, str):
            ok = isinstance(self.expected, str) and self.expected in subject
        elif isinstance(subject, list | tuple):
            matcher = EqualTo(self.expected)
            ok = any(matcher.match(item) for item in subject)
        elif isinstance(subject, Mapping):
            ok = self.expected in subject
        else:
            return self.result(False, f"cannot look inside a {type(subject).__name__}")
        return self.result(
            ok, "" if ok else f"{_shown(subject)} does not include {self.describe()}"
        )


class Equals(_Text):
    """Equal to ``expected``. A text against a text (a string, or the reply of a run, turn
    or trajectory) compares exactly, or with ``strip=`` and ``case_sensitive=``; anything
    else compares as the same JSON value (``10`` equals ``10.0``, a mapping whole in any key
    order, a plain value with its digest), and a matcher or a callable is used as given."""

    kind = "equals"

    def __init__(self, expected: Any, *, case_sensitive: bool = True, strip: bool = False) -> None:
        self.expected = expected
        self.case_sensitive = case_sensitive
        self.strip = strip

    def describe(self) -> str:
        if isinstance(self.expected, str):
            return repr(self.expected)
        return value_matcher(self.expected).describe()

    def evaluate(self, subject: Any) -> AssertionResult:
        if isinstance(self.expected, str) and isinstance(subject, TEXTS):
            text = text_of(subject, self.kind)
            left, right = self._fold(text), self._fold(self.expected)
            if self.strip:
                left, right = left.strip(), right.strip()
            ok = left == right
            return self.result(ok, "" if ok else f"{_quote(text)} != {_quote(self.expected)}")
        answer = value_matcher(self.expected).match(subject)
        if answer is None:
            return self.not_evaluable(f"the value {VERBATIM_HINT}")
        message = "" if answer else f"{_shown(subject)} does not match"
        if message and has_digest(subject):
            message += f"; {DIGESTED_HINT}"
        return self.result(answer, message)


class ValueSatisfies(Assertion):
    kind = "satisfies"

    def __init__(self, predicate: Callable[[Any], Any]) -> None:
        self.predicate = predicate

    def describe(self) -> str:
        return getattr(self.predicate, "__name__", "predicate")

    def evaluate(self, subject: Any) -> AssertionResult:
        if has_digest(subject):  # a predicate would judge the digest, not the value
            return self.not_evaluable(f"the value {VERBATIM_HINT}")
        ok = bool(self.predicate(subject))
        return self.result(ok, "" if ok else f"the predicate rejected {_shown(subject)}")


class ValueExpectation:
    """The chain ``ctx.expect(value)`` returns: each method records one assertion and returns
    the chain; ``gate()``, ``soft()``, ``at_least(t)`` and ``label(s)`` tune the latest."""

    __slots__ = ("_host", "_last", "value")

    def __init__(self, host: Checks, value: Any) -> None:
        self._host = host
        self.value = value
        self._last: AssertionHandle | None = None

    def _record(self, assertion: Assertion) -> ValueExpectation:
        handle = self._host.check(assertion, self.value)
        assert isinstance(handle, AssertionHandle)
        self._last = handle
        return self

    def includes(self, expected: Any) -> ValueExpectation:
        return self._record(ValueIncludes(expected))

    def equals(self, expected: Any) -> ValueExpectation:
        return self._record(Equals(expected))

    def matches(self, pattern: str) -> ValueExpectation:
        return self._record(MatchesRegex(pattern))

    def similarity(self, expected: str) -> ValueExpectation:
        self._record(LevenshteinDistance(expected, threshold=1.0))
        return self.soft()

    def satisfies(self, predicate: Callable[[Any], Any]) -> ValueExpectation:
        return self._record(ValueSatisfies(predicate))

    @property
    def last(self) -> AssertionHandle:
        if self._last is None:
            raise RuntimeError("expect(value) has recorded nothing yet; call includes(...) first")
        return self._last

    def gate(self) -> ValueExpectation:
        self.last.gate()
        return self

    def soft(self) -> ValueExpectation:
        self.last.soft()
        return self

    def at_least(self, threshold: float) -> ValueExpectation:
        self.last.at_least(threshold)
        return self

    def label(self, text: str) -> ValueExpectation:
        self.last.label(text)
        return self
