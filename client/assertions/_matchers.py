"""Matchers for tool arguments, results and event data, and count predicates.
A matcher answers ``True``, ``False`` or ``None`` (redacted, needed verbatim), and a plain
value decides the same against its digest. See ARCHITECTURE.md, "Matchers".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from evalport.protocol import is_digest, matches_digest

from .._core import digest_text

# How to see digested values, for every message that shows or needs them.
SEE_VALUES: Final = (
    'run with --trace-policy verbatim (or trace-policy = "verbatim" in [tool.evalport]; '
    "TracePolicy.verbatim() in Python) or allow-list this tool/argument in the trace policy"
)
VERBATIM_HINT: Final = f"needs verbatim data but the run was redacted (digests only); {SEE_VALUES}"
DIGESTED_HINT: Final = f"the values are digests (trace policy); to see them, {SEE_VALUES}"


def has_digest(value: Any) -> bool:
    """Whether ``value`` is a digest or holds one anywhere inside."""
    if is_digest(value):
        return True
    if isinstance(value, dict):
        return any(has_digest(item) for item in value.values())
    if isinstance(value, list):
        return any(has_digest(item) for item in value)
    return False


class Matcher:
    """Base class: :meth:`match` returns ``True``, ``False`` or ``None`` (cannot tell)."""

    def match(self, value: Any) -> bool | None:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, slots=True)
class EqualTo(Matcher):
    """The same JSON value as ``expected`` (:func:`evalport.protocol.json_equal`: ``10``
    equals ``10.0``, maps in any key order), or a digest of it."""

    expected: Any

    def match(self, value: Any) -> bool | None:
        return matches_digest(self.expected, value)

    def describe(self) -> str:
        return short(self.expected)


@dataclass(frozen=True, slots=True)
class AnyValue(Matcher):
    """Present, whatever the value (redacted or not)."""

    def match(self, value: Any) -> bool | None:
        return True

    def describe(self) -> str:
        return "<any>"


@dataclass(frozen=True, slots=True)
class OneOf(Matcher):
    """Equal to one of ``options`` (digests compared by hash)."""

    options: tuple[Any, ...]

    def match(self, value: Any) -> bool | None:
        return any(EqualTo(option).match(value) for option in self.options)

    def describe(self) -> str:
        return "one of " + ", ".join(short(option) for option in self.options)


@dataclass(frozen=True, slots=True)
class Predicate(Matcher):
    """A callable over the verbatim value; ``None`` on redacted data."""

    func: Callable[[Any], Any]

    def match(self, value: Any) -> bool | None:
        if has_digest(value):
            return None
        try:
            return bool(self.func(value))
        except Exception:  # e.g. a key the predicate expects is absent from this call
            return False

    def describe(self) -> str:
        return getattr(self.func, "__name__", "predicate")


@dataclass(frozen=True, slots=True)
class Regex(Matcher):
    """A string searched with a regular expression (needs verbatim data)."""

    pattern: str

    def match(self, value: Any) -> bool | None:
        if has_digest(value):
            return None
        return isinstance(value, str) and re.search(self.pattern, value) is not None

    def describe(self) -> str:
        return f"/{self.pattern}/"


def _as_map(value: Any) -> Any:
    """A JSON object text decoded to its mapping; anything else as it is."""
    if isinstance(value, str):
        try:
            decoded = msgspec.json.decode(value)
        except msgspec.DecodeError:
            return value
        return decoded if isinstance(decoded, dict) else value
    return value


def all_of(answers: Iterable[bool | None]) -> bool | None:
    """Three-valued *and*: ``False`` if any answer is, else ``None`` if any is, else ``True``."""
    seen = set(answers)
    return False if False in seen else None if None in seen else True


class Subset(Matcher):
    """Every given key is present and matches; other keys are ignored."""

    __slots__ = ("_matchers", "expected")

    def __init__(self, expected: Mapping[str, Any]) -> None:
        self.expected = expected
        self._matchers = tuple((key, value_matcher(spec)) for key, spec in expected.items())

    def match(self, value: Any) -> bool | None:
        value = _as_map(value)
        if not isinstance(value, dict):
            return False
        if is_digest(value):
            # the whole map was digested: its keys are unknown, unless it is exactly ours
            plain = all(isinstance(matcher, EqualTo) for _, matcher in self._matchers)
            return True if plain and matches_digest(dict(self.expected), value) else None
        undecided = False
        for key, matcher in self._matchers:
            answer = matcher.match(value[key]) if key in value else False
            if answer is False:
                return False
            undecided = undecided or answer is None
        return None if undecided else True

    def describe(self) -> str:
        return _describe_map(self.expected, "⊆")


class Exact(Subset):
    """The same keys, each matching; a map digested whole matches by its own digest."""

    __slots__ = ()

    def match(self, value: Any) -> bool | None:
        value = _as_map(value)
        if not isinstance(value, dict):
            return False
        if is_digest(value):
            if any(callable(spec) or isinstance(spec, Matcher) for spec in self.expected.values()):
                return None
            return matches_digest(dict(self.expected), value)
        if set(value) != set(self.expected):
            return False
        return super().match(value)

    def describe(self) -> str:
        return _describe_map(self.expected, "==")


def as_matcher(spec: Any) -> Matcher:
    """A matcher for ``spec``: matchers as they are, callables as predicates, mappings
    as subset matches, anything else by equality."""
    if isinstance(spec, Mapping) and not isinstance(spec, Matcher) and not callable(spec):
        return Subset(spec)
    return value_matcher(spec)


def value_matcher(spec: Any) -> Matcher:
    """A matcher for one value (an argument's, a result): matchers and callables as they
    are, anything else, mappings included, by equality. A digested value is one hash of
    the whole value, so only equality can be decided on it; ``Subset({...})`` matches
    part of a verbatim value."""
    if isinstance(spec, Matcher):
        return spec
    return Predicate(spec) if callable(spec) else EqualTo(spec)


def any_value() -> AnyValue:
    """Matches any value, redacted or not (the key only has to be present)."""
    return AnyValue()


def one_of(*options: Any) -> OneOf:
    """Matches a value equal to one of ``options``."""
    return OneOf(tuple(options))


def _compact(value: Any) -> str:
    """A value holding digests, each shown as its shape and a short hash."""
    if is_digest(value):
        return digest_text(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_compact(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_compact(item) for item in value) + "]"
    return short(value, 10**6)


def error_lines(errors: str, limit: int = 200) -> str:
    """A run's ``errors`` text for a message: digested lines shown compactly, and how to
    see them."""
    lines = [_as_map(line) if line.startswith('{"hash":"') else line for line in errors.split("\n")]
    digested = any(is_digest(line) for line in lines)
    text = "; ".join(_compact(line) if is_digest(line) else line for line in lines)
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"{text}; {DIGESTED_HINT}" if digested else text


def short(value: Any, limit: int = 60) -> str:
    """A value for a message: JSON, cut to ``limit``; digests shown compactly
    (``{city: <string:5>#991bedb8}``), never as their JSON."""
    if has_digest(value):
        text = _compact(value)
    else:
        try:
            text = msgspec.json.encode(value).decode()
        except (TypeError, msgspec.EncodeError):
            text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_map(expected: Mapping[str, Any], relation: str) -> str:
    shown = ", ".join(f"{key}={value_matcher(spec).describe()}" for key, spec in expected.items())
    return f"args {relation} {{{shown}}}"


# -- counts -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Count:
    """A predicate over a number of calls: ``low <= n <= high`` (``high`` None = no cap)."""

    low: int = 1
    high: int | None = None

    def __post_init__(self) -> None:
        if min(self.low, self.low if self.high is None else self.high) < 0:
            raise ValueError(f"a count cannot be negative: {self.describe()}")
        if self.high is not None and self.low > self.high:
            raise ValueError(f"between({self.low}, {self.high}): low must not exceed high")

    def check(self, count: int) -> bool:
        return count >= self.low and (self.high is None or count <= self.high)

    def settle(self, matched: int, undecided: int) -> bool | None:
        """The verdict over every reading of ``undecided`` items that could not be read
        (each may or may not match); ``None`` when the readings disagree."""
        verdicts = {self.check(n) for n in range(matched, matched + undecided + 1)}
        return verdicts.pop() if len(verdicts) == 1 else None

    def describe(self) -> str:
        if self.high is None:
            return f"at least {self.low}"
        if self.low == self.high:
            return f"exactly {self.low}"
        if self.low == 0:
            return f"at most {self.high}"
        return f"between {self.low} and {self.high}"


def exactly(count: int) -> Count:
    """Exactly ``count`` times."""
    return Count(count, count)


def at_least(count: int) -> Count:
    """``count`` times or more."""
    return Count(count, None)


def at_most(count: int) -> Count:
    """``count`` times or fewer (zero included)."""
    return Count(0, count)


def between(low: int, high: int) -> Count:
    """``low`` to ``high`` calls, both included."""
    return Count(low, high)


def as_count(spec: int | Count | None) -> Count:
    """An ``int`` means exactly; ``None`` means at least one."""
    if spec is None:
        return Count(1, None)
    if isinstance(spec, Count):
        return spec
    if isinstance(spec, bool) or not isinstance(spec, int):
        raise TypeError(f"count must be an int or a Count (at_least(...)), got {spec!r}")
    return exactly(spec)
