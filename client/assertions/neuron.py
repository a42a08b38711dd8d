"""Neuron AI's assertion names, for suites ported from it (aliases, no new logic).

``from evalport.client.assertions.neuron import *`` and keep writing
``self.check(StringContains("x"), output)`` and
``self.check(TrajectoryMatches(["a", "b"], Mode.Subset), trajectory)`` in an
:class:`~evalport.client.Evaluator`. Constructor arguments follow evalport's
classes (Python keywords: ``reference=``, ``threshold=``, ``max_distance=``).
The judges (``AgentJudge``, ``FaithfulnessJudge``, ...) are evalport's judge objects
(:mod:`evalport.client.judges`); their ``judge=`` is a judge, passed by keyword, and
may be left out to use the case's or the configured one.
"""

from __future__ import annotations

from .. import judges as _judges
from . import _approvals, _similarity, _text, _tools

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
    "TrajectoryMatches",
]

StringContains = _text.Contains
StringContainsAll = _text.ContainsAll
StringContainsAny = _text.ContainsAny
StringStartsWith = _text.StartsWith
StringEndsWith = _text.EndsWith
StringLengthBetween = _text.LengthBetween
StringDistance = _text.LevenshteinDistance
StringSimilarity = _similarity.EmbeddingSimilarity
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
