"""Neuron AI's assertion names, for suites ported from it (aliases, no new logic).

``from evalport.client.assertions.neuron import *`` and keep writing
``self.check(StringContains("x"), output)`` and
``self.check(TrajectoryMatches(["a", "b"], Mode.Subset), trajectory)`` in an
:class:`~evalport.client.evaluator.Evaluator`. Constructor arguments follow evalport's
classes (Python keywords: ``reference=``, ``threshold=``, ``max_distance=``).
"""

from __future__ import annotations

from .approvals import ToolWasApproved, ToolWasRejected
from .similarity import EmbeddingSimilarity
from .text import (
    Contains,
    ContainsAll,
    ContainsAny,
    EndsWith,
    IsValidJson,
    LengthBetween,
    LevenshteinDistance,
    MatchesRegex,
    StartsWith,
)
from .tools import CalledTool, NotCalledTool, ToolOrder, ToolOrderMode

__all__ = [
    "IsValidJson",
    "MatchesRegex",
    "Mode",
    "StringContains",
    "StringContainsAll",
    "StringContainsAny",
    "StringDistance",
    "StringEndsWith",
    "StringLengthBetween",
    "StringSimilarity",
    "StringStartsWith",
    "ToolWasApproved",
    "ToolWasCalled",
    "ToolWasNotCalled",
    "ToolWasRejected",
    "TrajectoryMatches",
]

StringContains = Contains
StringContainsAll = ContainsAll
StringContainsAny = ContainsAny
StringStartsWith = StartsWith
StringEndsWith = EndsWith
StringLengthBetween = LengthBetween
StringDistance = LevenshteinDistance
StringSimilarity = EmbeddingSimilarity
ToolWasCalled = CalledTool
ToolWasNotCalled = NotCalledTool
TrajectoryMatches = ToolOrder


class Mode:
    """Neuron's ``Mode`` enum spelled as evalport's mode strings (see ``ToolOrderMode``)."""

    Strict = ToolOrderMode.STRICT
    Unordered = ToolOrderMode.UNORDERED
    Subset = ToolOrderMode.SUBSET
    Superset = ToolOrderMode.SUPERSET
