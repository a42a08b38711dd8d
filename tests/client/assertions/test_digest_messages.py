"""A failure on digested values says how to see them and shows digests compactly
(issue 15, item 1): never the digest's JSON (``{"hash":"sha256:991bedb8…``)."""

from __future__ import annotations

from evalport.client import Trajectory
from evalport.client.assertions import CalledTool, Equals, NoFailedActions, Succeeded
from evalport.protocol import digest
from runbuild import call, make_run, redacted

HOW = ("--trace-policy verbatim", 'trace-policy = "verbatim" in [tool.evalport]')


def short_hash(value: object) -> str:
    return str(digest(value)["hash"]).removeprefix("sha256:")[:8]


def test_a_failed_argument_check_on_a_redacted_run_says_how_to_see_the_values() -> None:
    run = redacted(make_run([call("get_weather", {"city": "paris"}, "18°C")]))
    outcome = CalledTool("get_weather", {"city": "Paris"}).evaluate(run)
    assert not outcome.passed and outcome.evaluated
    assert '{"hash"' not in outcome.message and "sha256:" not in outcome.message
    assert f"{{city: <redacted <string:5> #{short_hash('paris')}>}}" in outcome.message
    assert all(words in outcome.message for words in HOW)


def test_the_same_failure_on_a_verbatim_run_shows_the_values_and_no_hint() -> None:
    run = make_run([call("get_weather", {"city": "paris"}, "18°C")])
    outcome = CalledTool("get_weather", {"city": "Paris"}).evaluate(run)
    assert '{"city":"paris"}' in outcome.message
    assert "--trace-policy" not in outcome.message


def test_a_failed_result_and_value_check_show_digests_compactly() -> None:
    run = redacted(make_run([call("lookup", {"q": 1}, {"temp": 18, "unit": "C"})]))
    result = Trajectory.of(run).calls_of("lookup")[0].result
    outcome = Equals({"temp": 19, "unit": "C"}).evaluate(result)
    assert not outcome.passed
    assert '{"hash"' not in outcome.message and all(words in outcome.message for words in HOW)
    assert f"#{short_hash({'temp': 18, 'unit': 'C'})}" in outcome.message


def test_digested_error_texts_are_shown_compactly() -> None:
    run = make_run(status="failed")
    run.errors = "ValueError: card 4111111111111111 declined"
    safe = redacted(run)
    assert safe.errors.startswith('{"hash":"sha256:')
    for outcome in (Succeeded().evaluate(safe), NoFailedActions().evaluate(safe)):
        assert not outcome.passed
        assert '{"hash"' not in outcome.message and "4111" not in outcome.message
        assert "<string:" in outcome.message or "hidden by the safe trace policy" in outcome.message
        assert "--trace-policy verbatim" in outcome.message
