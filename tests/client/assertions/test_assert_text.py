"""Text assertions on strings and on runs (verbatim and redacted: replies stay in clear)."""

from __future__ import annotations

import pytest
from evalport.client import Trajectory, Turn
from evalport.client.assertions import (
    AssertionTypeError,
    Contains,
    ContainsAll,
    ContainsAny,
    EndsWith,
    Equals,
    IsValidJson,
    LengthBetween,
    LevenshteinDistance,
    MatchesJsonSchema,
    MatchesRegex,
    StartsWith,
)
from evalport.client.assertions._text import levenshtein
from runbuild import make_run, redacted

REPLY = "Your refund for order A1049 is on its way!"


def test_contains_passes_and_fails_with_a_message() -> None:
    assert Contains("A1049").evaluate(REPLY).passed
    failed = Contains("B2").evaluate(REPLY)
    assert not failed.passed and failed.score == 0.0
    assert "lacks 'B2'" in failed.message
    assert Contains("REFUND", case_sensitive=False).evaluate(REPLY).passed
    assert not Contains("REFUND").evaluate(REPLY).passed


@pytest.mark.parametrize("subject_kind", ["str", "run", "redacted", "turn", "trajectory"])
def test_text_assertions_read_every_kind_of_subject(subject_kind: str) -> None:
    run = make_run(reply=REPLY)
    subject = {
        "str": REPLY,
        "run": run,
        "redacted": redacted(run),
        "turn": Turn(index=1, message="hi", run=run),
        "trajectory": Trajectory(run),
    }[subject_kind]
    assert StartsWith("Your").evaluate(subject).passed
    assert EndsWith("way!").evaluate(subject).passed
    assert Equals(REPLY).evaluate(subject).passed


def test_wrong_subject_type_is_a_type_error_not_a_failure() -> None:
    with pytest.raises(AssertionTypeError, match="contains evaluates text"):
        Contains("x").evaluate(42)
    with pytest.raises(AssertionTypeError, match="got dict"):
        IsValidJson().evaluate({"a": 1})


def test_contains_all_gives_partial_credit() -> None:
    result = ContainsAll(["refund", "A1049", "sorry", "today"]).evaluate(REPLY)
    assert result.score == 0.5 and not result.passed
    assert result.context["missing"] == ["sorry", "today"]
    assert ContainsAll(["refund", "A1049"]).evaluate(REPLY).passed
    with pytest.raises(TypeError):
        ContainsAll("refund")


def test_contains_any() -> None:
    assert ContainsAny(["nope", "order"]).evaluate(REPLY).passed
    result = ContainsAny(["nope", "never"]).evaluate(REPLY)
    assert not result.passed and "none of" in result.message


def test_starts_ends_with_failures_quote_the_text() -> None:
    result = StartsWith("Sorry").evaluate(REPLY)
    assert not result.passed and "does not start with 'Sorry'" in result.message
    assert not EndsWith("?").evaluate(REPLY).passed
    assert EndsWith("WAY!", case_sensitive=False).evaluate(REPLY).passed


def test_length_between_is_inclusive() -> None:
    assert LengthBetween(len(REPLY), len(REPLY)).evaluate(REPLY).passed
    result = LengthBetween(1, 10).evaluate(REPLY)
    assert not result.passed and result.context["length"] == len(REPLY)
    with pytest.raises(ValueError):
        LengthBetween(5, 1)


def test_equals_with_strip_and_case() -> None:
    assert Equals("ok", strip=True).evaluate("  ok\n").passed
    assert not Equals("ok").evaluate("  ok\n").passed
    assert Equals("OK", case_sensitive=False).evaluate("ok").passed


def test_regex_python_and_php_delimited() -> None:
    assert MatchesRegex(r"A\d{4}").evaluate(REPLY).passed
    assert MatchesRegex(r"/^your refund/i").evaluate(REPLY).passed
    assert not MatchesRegex(r"/^your refund/").evaluate(REPLY).passed
    result = MatchesRegex(r"\d{3}-\d{2}").evaluate(REPLY)
    assert not result.passed and "does not match" in result.message
    assert MatchesRegex(r"A\d+").evaluate(REPLY).context["match"] == "A1049"


def test_is_valid_json() -> None:
    assert IsValidJson().evaluate('{"a": [1, 2]}').passed
    result = IsValidJson().evaluate("{'a': 1}")
    assert not result.passed and result.message.startswith("not valid JSON")


def test_json_schema_lists_violations() -> None:
    schema = {
        "type": "object",
        "required": ["order", "amount"],
        "properties": {"order": {"type": "string"}, "amount": {"type": "number", "maximum": 100}},
    }
    assertion = MatchesJsonSchema(schema)
    assert assertion.evaluate('{"order": "A1", "amount": 20}').passed
    result = assertion.evaluate('{"order": 7, "amount": 500}')
    assert not result.passed
    assert "order: 7 is not of type 'string'" in result.message
    assert "amount: 500 is greater than the maximum of 100" in result.message
    assert not assertion.evaluate("not json").passed


def test_invalid_schema_is_refused_up_front() -> None:
    with pytest.raises(Exception, match="is not valid"):
        MatchesJsonSchema({"type": "no-such-type"})


def test_levenshtein_distance_and_score() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3
    assert levenshtein("same", "same") == 0
    result = LevenshteinDistance("sitting", threshold=0.5).evaluate("kitten")
    assert result.score == pytest.approx(1 - 3 / 7) and result.passed
    assert result.context["distance"] == 3
    assert not LevenshteinDistance("sitting", threshold=0.9).evaluate("kitten").passed
    capped = LevenshteinDistance("sitting", threshold=0.1, max_distance=2).evaluate("kitten")
    assert not capped.passed and capped.score == 0.0 and "exceeds max_distance 2" in capped.message


def test_equals_compares_any_value_and_value_equals_is_its_deprecated_name() -> None:
    import evalport.client.assertions as assertions

    assert Equals({"a": 1}).evaluate({"a": 1.0}).passed
    assert not Equals(10).evaluate(11).passed
    with pytest.warns(DeprecationWarning, match="use Equals"):
        assert assertions.ValueEquals is Equals
