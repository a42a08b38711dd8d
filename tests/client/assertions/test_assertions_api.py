"""The public names of evalport.client.assertions are pinned (additions are deliberate)."""

from __future__ import annotations

import evalport.client.assertions as assertions

EXPECTED = {
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
    "HashingEmbedder",
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
    "Subset",
    "Succeeded",
    "TokensAtMost",
    "ToolOrder",
    "ToolOrderMode",
    "ToolWasApproved",
    "ToolWasInjected",
    "ToolWasRejected",
    "TotalTokensAtMost",
    "UsedNoTools",
    "ValueEquals",
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
}


def test_public_api_is_pinned() -> None:
    assert set(assertions.__all__) == EXPECTED
    assert all(hasattr(assertions, name) for name in assertions.__all__)


def test_every_assertion_class_has_a_kind_and_evaluate() -> None:
    for name in assertions.__all__:
        value = getattr(assertions, name)
        if isinstance(value, type) and issubclass(value, assertions.Assertion):
            if value is assertions.Assertion:
                continue
            assert value.kind != "assertion", name
            assert (
                value.evaluate is not assertions.Assertion.evaluate or name == "EmbeddingSimilarity"
            )
