"""Neuron AI's assertion names, for suites ported from it: same names, same verdicts.

``from evalport.client.assertions.neuron import *`` and keep writing
``self.check(StringContains("x"), output)`` in an :class:`~evalport.client.Evaluator`.
Most names are evalport's classes under Neuron's name, with evalport's keyword arguments;
where Neuron decides differently (``StringContains*`` ignore case, ``StringDistance``
divides by ``max_distance``) a small subclass decides as Neuron does, with Neuron's
arguments in Neuron's order. The judges are evalport's, ``judge=`` by keyword.
"""

from __future__ import annotations

from collections.abc import Sequence as _Sequence

from .. import judges as _judges
from . import _approvals, _base, _similarity, _text, _tools

__all__ = [
    "AgentJudge",
    "ClassifierJudge",
    "CorrectnessJudge",
    "FaithfulnessJudge",
    "HelpfulnessJudge",
    "IsValidJson",
    "MatchesRegex",
    "Mode",
    "RelevanceJudge",
    "StringAssertion",
    "StringContains",
    "StringContainsAll",
    "StringContainsAny",
    "StringDistance",
    "StringEndsWith",
    "StringLengthBetween",
    "StringSimilarity",
    "StringStartsWith",
    "TaskCompletionJudge",
    "ToolWasApproved",
    "ToolWasCalled",
    "ToolWasNotCalled",
    "ToolWasRejected",
    "TrajectoryAssertion",
    "TrajectoryMatches",
]

StringStartsWith = _text.StartsWith
StringEndsWith = _text.EndsWith
StringLengthBetween = _text.LengthBetween
StringAssertion = _base.StringAssertion
TrajectoryAssertion = _base.TrajectoryAssertion
ToolWasCalled = _tools.CalledTool
ToolWasNotCalled = _tools.NotCalledTool
TrajectoryMatches = _tools.ToolOrder
IsValidJson = _text.IsValidJson
MatchesRegex = _text.MatchesRegex
ToolWasApproved = _approvals.ToolWasApproved
ToolWasRejected = _approvals.ToolWasRejected
AgentJudge = _judges.Custom
ClassifierJudge = _judges.ClassifierJudge
CorrectnessJudge = _judges.Correctness
FaithfulnessJudge = _judges.Faithfulness
HelpfulnessJudge = _judges.Helpfulness
RelevanceJudge = _judges.Relevance
TaskCompletionJudge = _judges.TaskCompletion


class Mode:
    """Neuron's ``Mode`` enum spelled as evalport's mode strings (see ``ToolOrderMode``)."""

    Strict = _tools.ToolOrderMode.STRICT
    Unordered = _tools.ToolOrderMode.UNORDERED
    Subset = _tools.ToolOrderMode.SUBSET
    Superset = _tools.ToolOrderMode.SUPERSET


class StringContains(_text.Contains):
    """Neuron's ``StringContains``: the text contains ``keyword``, ignoring case."""

    def __init__(self, keyword: str) -> None:
        super().__init__(keyword, case_sensitive=False)


class StringContainsAll(_text.ContainsAll):
    """Neuron's ``StringContainsAll``: the text contains every keyword, ignoring case."""

    def __init__(self, keywords: _Sequence[str]) -> None:
        super().__init__(keywords, case_sensitive=False)


class StringContainsAny(_text.ContainsAny):
    """Neuron's ``StringContainsAny``: the text contains a keyword, ignoring case."""

    def __init__(self, keywords: _Sequence[str]) -> None:
        super().__init__(keywords, case_sensitive=False)


class StringDistance(_text.LevenshteinDistance):
    """Neuron's ``StringDistance``: scores ``1 - distance / max_distance``, 0 beyond
    ``max_distance`` (a ``max_distance`` of 0 admits only the reference itself)."""

    def __init__(self, reference: str, threshold: float = 0.5, max_distance: int = 50) -> None:
        if max_distance < 0:
            raise ValueError(
                f"StringDistance: max_distance must not be negative, got {max_distance}"
            )
        super().__init__(reference, threshold=threshold, max_distance=max_distance)

    def similarity(self, distance: int, text: str) -> float:
        scale = self.max_distance or 0
        return 1.0 - distance / scale if scale else 1.0


class StringSimilarity(_similarity.EmbeddingSimilarity):
    """Neuron's ``StringSimilarity``: ``(reference, embedder, threshold=0.6)``."""

    def __init__(
        self, reference: str, embedder: _similarity.Embedder, threshold: float = 0.6
    ) -> None:
        super().__init__(reference, embedder, threshold=threshold)
