"""Neuron's names in ``evalport.client.assertions.neuron`` keep Neuron's verdicts (issue 40).

Each expectation below is Neuron's own behaviour, from its documentation and sources:
the contains family folds case, ``StringDistance`` scores ``1 - distance / maxDistance``
(``maxDistance`` 50, 0 beyond it) and takes ``(reference, threshold, maxDistance)``
positionally, ``StringSimilarity`` takes ``(reference, embedder, threshold=0.6)``.
"""

from __future__ import annotations

import pytest
from evalport.client import Trajectory
from evalport.client.assertions import (
    AssertionTypeError,
    Contains,
    HashingEmbedder,
    LevenshteinDistance,
    StringAssertion,
    TrajectoryAssertion,
)
from evalport.client.assertions.neuron import StringAssertion as NeuronStringAssertion
from evalport.client.assertions.neuron import (
    StringContains,
    StringContainsAll,
    StringContainsAny,
    StringDistance,
    StringEndsWith,
    StringSimilarity,
    StringStartsWith,
)
from runbuild import call, make_run


def test_the_contains_family_folds_case_as_neuron_does() -> None:
    # the seed's first example: StringContains('positive') on a positive reply
    assert StringContains("positive").evaluate("Positive: I love this!").passed
    assert StringContainsAll(["HELLO", "world"]).evaluate("Hello beautiful World").passed
    assert StringContainsAny(["SUCCESS", "done"]).evaluate("Task completed: success").passed
    assert not StringContainsAll(["hello", "moon"]).evaluate("Hello world").passed
    # Neuron's StartsWith/EndsWith compare as written
    assert not StringStartsWith("hello").evaluate("Hello world").passed
    assert not StringEndsWith("WORLD").evaluate("Hello world").passed
    # evalport's own classes keep case-sensitive matching
    assert not Contains("positive").evaluate("Positive: I love this!").passed


def test_string_distance_scores_against_max_distance_as_neuron_does() -> None:
    result = StringDistance("No.", 0.5).evaluate("Yes.")  # distance 3 of at most 50
    assert result.passed and result.score == pytest.approx(1 - 3 / 50)
    assert StringDistance("expected text", 0.5, 50).evaluate("expected text!").passed
    strict = StringDistance("abcdef", 0.5, 4)  # distance 3 of at most 4: 0.25
    assert strict.evaluate("abc").score == pytest.approx(0.25)
    assert not strict.evaluate("abc").passed
    beyond = StringDistance("a" * 60, threshold=0.0).evaluate("")  # 60 edits > 50
    assert beyond.score == 0.0 and not beyond.passed
    assert StringDistance("same", max_distance=0).evaluate("same").score == 1.0
    assert not StringDistance("same", max_distance=0).evaluate("sane").passed
    # evalport's own class keeps its scale (the longer string): 1 - 3/4
    assert LevenshteinDistance("No.").evaluate("Yes.").score == pytest.approx(0.25)


async def test_string_similarity_takes_the_seed_positional_arguments() -> None:
    check = StringSimilarity("The quick brown fox", HashingEmbedder(), 0.6)
    assert check.threshold == 0.6
    assert (await check.aevaluate("the quick brown fox")).passed
    assert StringSimilarity("x", HashingEmbedder()).threshold == 0.6  # Neuron's default


class ShoutedAssertion(StringAssertion):
    """The text is written in capitals."""

    kind = "shouted"

    def evaluate_string(self, text: str):
        return self.result(text.isupper(), "" if text.isupper() else f"{text!r} is not shouted")


class CallsAtMost(TrajectoryAssertion):
    """At most ``limit`` tool calls."""

    kind = "calls_at_most"

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def evaluate_trajectory(self, trajectory: Trajectory):
        count = len(trajectory.tool_calls())
        return self.result(count <= self.limit, f"{count} calls")


def test_custom_text_and_trajectory_assertions_are_one_method_subclasses() -> None:
    run = make_run([call("lookup", {"order_id": "A1"}, {"status": "late"})], reply="LATE")
    assert ShoutedAssertion().evaluate("LOUD").passed
    assert ShoutedAssertion().evaluate(run).passed  # a run's reply is its text
    assert not ShoutedAssertion().evaluate("quiet").passed
    with pytest.raises(AssertionTypeError, match="shouted evaluates text"):
        ShoutedAssertion().evaluate(42)
    assert CallsAtMost(1).evaluate(run).passed
    assert not CallsAtMost(0).evaluate(Trajectory(run)).passed
    with pytest.raises(AssertionTypeError, match="calls_at_most evaluates an AgentRun"):
        CallsAtMost(1).evaluate("text")
    assert NeuronStringAssertion is StringAssertion
