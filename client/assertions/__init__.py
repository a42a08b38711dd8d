"""The assertion catalogue: small classes with one ``evaluate(subject)`` method.

Use them on their own against a run (``CalledTool("refund").evaluate(run)``) or through
the eval context (``ctx.called_tool("refund")``), which evaluates them on the run so far
and returns a handle with ``soft()``, ``gate()``, ``at_least(t)`` and ``label(s)``. They
decide the same on a redacted run as on a verbatim one, or say they cannot.
"""

import warnings as _warnings

from ._approvals import Interrupted, ToolWasApproved, ToolWasRejected
from ._base import (
    Assertion,
    AssertionTypeError,
    StringAssertion,
    TrajectoryAssertion,
    run_of,
    text_of,
)
from ._events import EventNotSeen, EventSeen, EventsInOrder, EventsSatisfy
from ._expect import Equals, ValueExpectation, ValueIncludes, ValueSatisfies
from ._faults import ToolWasInjected
from ._latency import (
    FirstEventWithin,
    FirstTokenWithin,
    FirstToolCallWithin,
    TrialWithin,
    TurnWithin,
)
from ._matchers import (
    Count,
    Exact,
    Matcher,
    Predicate,
    Regex,
    Subset,
    any_value,
    at_least,
    at_most,
    between,
    exactly,
    one_of,
)
from ._outcome import Failed, Stopped, StopReasonIs, Succeeded
from ._similarity import (
    Embedder,
    EmbedderError,
    EmbeddingSimilarity,
    HashingEmbedder,
    OpenAIEmbedder,
)
from ._steps import MaxSteps, StepCount, TokensAtMost, TotalTokensAtMost
from ._text import (
    Contains,
    ContainsAll,
    ContainsAny,
    EndsWith,
    IsValidJson,
    LengthBetween,
    LevenshteinDistance,
    MatchesJsonSchema,
    MatchesRegex,
    StartsWith,
)
from ._tools import (
    CalledTool,
    MaxToolCalls,
    NoFailedActions,
    NotCalledTool,
    ToolOrder,
    ToolOrderMode,
    UsedNoTools,
)

__all__ = [
    "Assertion",
    "AssertionTypeError",
    "CalledTool",
    "Contains",
    "ContainsAll",
    "ContainsAny",
    "Count",
    "Embedder",
    "EmbedderError",
    "EmbeddingSimilarity",
    "EndsWith",
    "Equals",
    "EventNotSeen",
    "EventSeen",
    "EventsInOrder",
    "EventsSatisfy",
    "Exact",
    "Failed",
    "FirstEventWithin",
    "FirstTokenWithin",
    "FirstToolCallWithin",
    "HashingEmbedder",
    "Interrupted",
    "IsValidJson",
    "LengthBetween",
    "LevenshteinDistance",
    "Matcher",
    "MatchesJsonSchema",
    "MatchesRegex",
    "MaxSteps",
    "MaxToolCalls",
    "NoFailedActions",
    "NotCalledTool",
    "OpenAIEmbedder",
    "Predicate",
    "Regex",
    "StartsWith",
    "StepCount",
    "StopReasonIs",
    "Stopped",
    "StringAssertion",
    "Subset",
    "Succeeded",
    "TokensAtMost",
    "ToolOrder",
    "ToolOrderMode",
    "ToolWasApproved",
    "ToolWasInjected",
    "ToolWasRejected",
    "TotalTokensAtMost",
    "TrajectoryAssertion",
    "TrialWithin",
    "TurnWithin",
    "UsedNoTools",
    "ValueExpectation",
    "ValueIncludes",
    "ValueSatisfies",
    "any_value",
    "at_least",
    "at_most",
    "between",
    "exactly",
    "one_of",
    "run_of",
    "text_of",
]


def __getattr__(name: str) -> object:
    # Deprecated names, kept for one release (listed in CHANGELOG.md).
    if name == "ValueEquals":
        _warnings.warn(
            "evalport.client.assertions.ValueEquals is deprecated; use Equals (it compares "
            "any value, and text as text)",
            DeprecationWarning,
            stacklevel=2,
        )
        return Equals
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
