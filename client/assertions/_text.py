"""Text assertions: on a string, or on the reply of a run, turn or trajectory.
See ARCHITECTURE.md, "The assertion families".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from evalport.protocol import require

from .._core import AssertionResult
from ._base import Assertion, text_of

_QUOTE_LIMIT: Final = 200


def _quote(text: str) -> str:
    shown = text if len(text) <= _QUOTE_LIMIT else text[: _QUOTE_LIMIT - 3] + "..."
    return repr(shown)


class _Text(Assertion):
    """A text assertion with an optional case-insensitive mode."""

    case_sensitive: bool = True

    def _fold(self, text: str) -> str:
        return text if self.case_sensitive else text.casefold()


class _Affix(_Text):
    """The text holds ``needle`` where :meth:`holds` looks for it."""

    fails = "lacks"
    holds: Callable[[str, str], bool] = staticmethod(str.__contains__)

    def __init__(self, needle: str, *, case_sensitive: bool = True) -> None:
        if not isinstance(needle, str):
            raise TypeError(
                f"{self.kind} looks for text, not {type(needle).__name__}: "
                f"write {self.kind}({str(needle)!r})"
            )
        self.needle = needle
        self.case_sensitive = case_sensitive

    def describe(self) -> str:
        return repr(self.needle)

    def evaluate(self, subject: Any) -> AssertionResult:
        text = text_of(subject, self.kind)
        ok = self.holds(self._fold(text), self._fold(self.needle))
        return self.result(ok, "" if ok else f"{_quote(text)} {self.fails} {self.needle!r}")


class Contains(_Affix):
    """The text contains ``needle``."""

    kind = "contains"


class StartsWith(_Affix):
    """The text starts with ``prefix``."""

    kind = "starts_with"
    fails = "does not start with"
    holds = staticmethod(str.startswith)

    def __init__(self, prefix: str, *, case_sensitive: bool = True) -> None:
        super().__init__(prefix, case_sensitive=case_sensitive)


class EndsWith(_Affix):
    """The text ends with ``suffix``."""

    kind = "ends_with"
    fails = "does not end with"
    holds = staticmethod(str.endswith)

    def __init__(self, suffix: str, *, case_sensitive: bool = True) -> None:
        super().__init__(suffix, case_sensitive=case_sensitive)


class _Needles(_Text):
    """A text assertion over a list of needles."""

    def __init__(self, needles: Sequence[str], *, case_sensitive: bool = True) -> None:
        if isinstance(needles, str):
            raise TypeError(f"{self.kind} takes a list of strings, not one string")
        self.needles = list(needles)
        if not all(isinstance(needle, str) for needle in self.needles):
            raise TypeError(f"{self.kind} takes a list of strings: write each one in quotes")
        self.case_sensitive = case_sensitive

    def describe(self) -> str:
        return ", ".join(repr(needle) for needle in self.needles)


class ContainsAll(_Needles):
    kind = "contains_all"

    def evaluate(self, subject: Any) -> AssertionResult:
        text = self._fold(text_of(subject, self.kind))
        missing = [needle for needle in self.needles if self._fold(needle) not in text]
        score = 1.0 - len(missing) / len(self.needles) if self.needles else 1.0
        message = f"missing {missing!r}" if missing else ""
        return self.result(score, message, missing=missing)


class ContainsAny(_Needles):
    kind = "contains_any"

    def evaluate(self, subject: Any) -> AssertionResult:
        text = text_of(subject, self.kind)
        folded = self._fold(text)
        found = [needle for needle in self.needles if self._fold(needle) in folded]
        message = "" if found else f"{_quote(text)} contains none of {self.needles!r}"
        return self.result(bool(found), message, found=found)


class LengthBetween(Assertion):
    """Length in characters within ``[minimum, maximum]`` (both included)."""

    kind = "length_between"

    def __init__(self, minimum: int, maximum: int) -> None:
        if minimum > maximum:
            raise ValueError(f"length_between({minimum}, {maximum}): minimum exceeds maximum")
        self.minimum, self.maximum = minimum, maximum

    def describe(self) -> str:
        return f"{self.minimum}, {self.maximum}"

    def evaluate(self, subject: Any) -> AssertionResult:
        length = len(text_of(subject, self.kind))
        ok = self.minimum <= length <= self.maximum
        message = "" if ok else f"length {length} is outside [{self.minimum}, {self.maximum}]"
        return self.result(ok, message, length=length)


_PHP_PATTERN = re.compile(r"^/(?P<body>.*)/(?P<flags>[imsxu]*)$", re.DOTALL)
_FLAGS: Final = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


class MatchesRegex(Assertion):
    kind = "matches_regex"

    def __init__(self, pattern: str | re.Pattern[str], flags: int = 0) -> None:
        if isinstance(pattern, str):
            php = _PHP_PATTERN.match(pattern)
            if php:
                for letter in php["flags"]:
                    flags |= _FLAGS.get(letter, 0)
                pattern = php["body"]
            pattern = re.compile(pattern, flags)
        self.pattern = pattern

    def describe(self) -> str:
        return f"/{self.pattern.pattern}/"

    def evaluate(self, subject: Any) -> AssertionResult:
        text = text_of(subject, self.kind)
        match = self.pattern.search(text)
        if match is None:
            return self.result(False, f"{_quote(text)} does not match /{self.pattern.pattern}/")
        return self.result(True, match=match.group(0))


class IsValidJson(Assertion):
    kind = "is_valid_json"

    def evaluate(self, subject: Any) -> AssertionResult:
        try:
            document = json.loads(text_of(subject, self.kind))
        except ValueError as error:
            return self.result(False, f"not valid JSON: {error}")
        return self.graded(document)

    def graded(self, document: Any) -> AssertionResult:
        """The result for text that is valid JSON."""
        return self.result(True)


class MatchesJsonSchema(IsValidJson):
    """The text is JSON valid against ``schema``; every violation is listed."""

    kind = "matches_json_schema"

    def __init__(self, schema: Mapping[str, Any]) -> None:
        jsonschema = require("jsonschema", "client", "MatchesJsonSchema")
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        self.validator = validator_class(schema)

    def graded(self, document: Any) -> AssertionResult:
        errors = sorted(self.validator.iter_errors(document), key=lambda e: list(e.path))
        if not errors:
            return self.result(True)
        problems = [f"{'/'.join(map(str, e.path)) or '$'}: {e.message}" for e in errors]
        return self.result(False, "; ".join(problems[:5]), errors=problems)


def levenshtein(left: str, right: str) -> int:
    """The edit distance between two strings (insertions, deletions, substitutions)."""
    if len(left) < len(right):
        left, right = right, left
    previous = list(range(len(right) + 1))
    for i, char in enumerate(left, 1):
        current = [i]
        for j, other in enumerate(right, 1):
            cost = 0 if char == other else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return previous[-1]


class LevenshteinDistance(Assertion):
    """Close to ``reference`` in edit distance (Neuron's ``StringDistance``)."""

    kind = "levenshtein"

    def __init__(
        self, reference: str, *, threshold: float = 0.5, max_distance: int | None = None
    ) -> None:
        self.reference = reference
        self.threshold = threshold
        self.max_distance = max_distance

    def describe(self) -> str:
        return _quote(self.reference)

    def evaluate(self, subject: Any) -> AssertionResult:
        text = text_of(subject, self.kind)
        distance = levenshtein(text, self.reference)
        if self.max_distance is not None and distance > self.max_distance:
            # a hard cap: it fails, whatever the threshold (even 0)
            message = f"distance {distance} exceeds max_distance {self.max_distance}"
            capped = self.result(0.0, message, distance=distance)
            capped.passed = False
            return capped
        score = self.similarity(distance, text)
        return self.result(score, f"distance {distance}", distance=distance)

    def similarity(self, distance: int, text: str) -> float:
        """The score of ``distance``: its share of the longer string's length, from 1."""
        longest = max(len(text), len(self.reference))
        return 1.0 - distance / longest if longest else 1.0
