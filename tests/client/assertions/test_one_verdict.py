"""One verdict whatever the trace policy (issue 15, item 2).

The same agent behaviour is evaluated three ways: the run seen **verbatim**, the run
**digested by the client** (``TracePolicy.safe()``), and the run **digested by the server**
(its own ``TracePolicy.safe()`` before encoding, as ``server/_records.py`` does) and decoded
by the client. Every value-matching expectation of the catalogue must reach the same
verdict on all three.

The numbers are where policies used to disagree: the wire may write a number in any JSON
form (``10``, ``10.0``, ``1e1``, ``1E+1``, ``-0``, ``-0.0``, big integers), the agent on
the server may hold an ``int`` or a ``float`` of the same value, and the eval author may
write either; maps arrive in any key order. Expectations are either equal to what the agent
did (in another form) or a near miss (``n + 1``, ``True`` for ``1``, a changed string).
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
from evalport.client import Trajectory
from evalport.client.assertions import (
    CalledTool,
    Contains,
    Equals,
    EventSeen,
    Exact,
    NotCalledTool,
    ToolWasApproved,
    one_of,
)
from evalport.protocol import AgentRun, RunEnvelope, TracePolicy, decode_run, encode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runbuild import call, make_run

NUMBERS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 10, 10.0, 1e16, 2**53, 2**53 + 1, 2**70, 1e300, 0.1, -2.5]),
)
LEAVES = st.one_of(
    NUMBERS, st.booleans(), st.none(), st.text(st.characters(codec="utf-8"), max_size=6)
)
KEYS = st.text("abcdxyz", min_size=1, max_size=3)
TREES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _integral(value: int | float) -> bool:
    return type(value) is int or value.is_integer()


def _python_forms(value: int | float) -> list[int | float]:
    """Python numbers equal to ``value``: an int when integral, a float when exact."""
    forms: list[int | float] = []
    if _integral(value):
        forms.append(int(value))
        try:
            if float(value) == value:
                forms.append(float(value))
        except OverflowError:
            pass
    else:
        forms.append(value)
    return forms


def _json_forms(value: int | float) -> list[str]:
    """JSON texts of numbers equal to ``value`` that a decoder reads back exactly."""
    texts: list[str] = []
    for number in _python_forms(value):
        if type(number) is int:
            texts += [str(number), f"{number}e0", f"{number}E+0"]
            if number == 0:
                texts += ["-0", "-0e0"]
        else:
            texts += [repr(number), f"{number:.17e}", f"{number:.17E}"]
            if number == 0:
                texts += ["-0.0", "0.0", "0E-3"]
    return [text for text in texts if json.loads(text) == value]


@st.composite
def rendered(draw: st.DrawFn, tree: Any) -> str:
    """``tree`` as JSON text, each number in a drawn form, each map in a drawn key order."""
    if _is_number(tree):
        return draw(st.sampled_from(_json_forms(tree)))
    if isinstance(tree, list):
        return "[" + ",".join(draw(rendered(item)) for item in tree) + "]"
    if isinstance(tree, dict):
        keys = draw(st.permutations(list(tree)))
        return "{" + ",".join(f"{json.dumps(k)}:{draw(rendered(tree[k]))}" for k in keys) + "}"
    return json.dumps(tree, ensure_ascii=False)


@st.composite
def variant(draw: st.DrawFn, tree: Any) -> Any:
    """The same JSON value as Python data: int or float, key order, list or tuple."""
    if _is_number(tree):
        return draw(st.sampled_from(_python_forms(tree)))
    if isinstance(tree, list):
        items = [draw(variant(item)) for item in tree]
        return tuple(items) if draw(st.booleans()) else items
    if isinstance(tree, dict):
        keys = draw(st.permutations(list(tree)))
        return {key: draw(variant(tree[key])) for key in keys}
    return tree


def near_miss(tree: Any) -> Any:
    """A value close to ``tree`` but a different JSON value (or ``tree`` itself when
    there is nothing to change, which is fine: the property is agreement, not failure)."""
    if isinstance(tree, bool):
        return int(tree)  # True is not 1
    if _is_number(tree):
        if tree in (0, 1):
            return bool(tree)
        bumped = tree + 1
        return bumped if bumped != tree else -tree
    if isinstance(tree, str):
        return tree + "x"
    if tree is None:
        return 0
    if isinstance(tree, list):
        if len(tree) > 1 and tree[0] != tree[-1]:
            return list(reversed(tree))
        return [near_miss(tree[0]), *tree[1:]] if tree else [None]
    if tree:
        first = next(iter(tree))
        return {**tree, first: near_miss(tree[first])}
    return {"a": None}


PLACEHOLDER = '"@@{}@@"'


def wire_run(arguments: dict[str, Any], result: Any, event: Any, texts: dict[str, str]) -> bytes:
    """A turn response whose payloads are written as ``texts`` (any JSON forms)."""
    holders = {key: f"@@{key}@@" for key in arguments}
    run = make_run(
        [call("lookup", holders, "@@result@@", approval="approved")],
        events=[("seen", "@@event@@")],
    )
    data = encode(RunEnvelope(run=run))
    for name, text in texts.items():
        data = data.replace(PLACEHOLDER.format(name).encode(), text.encode())
    return data


def three_runs(
    arguments: dict[str, Any],
    result: Any,
    event: Any,
    texts: dict[str, str],
    agent: tuple[dict[str, Any], Any, Any],
) -> dict[str, AgentRun]:
    verbatim = decode_run(wire_run(arguments, result, event, texts))
    client_safe = TracePolicy.safe().apply(decode_run(wire_run(arguments, result, event, texts)))
    agent_args, agent_result, agent_event = agent
    served = make_run(
        [call("lookup", agent_args, agent_result, approval="approved")],
        events=[("seen", agent_event)],
    )
    body = encode(RunEnvelope(run=TracePolicy.safe().apply(served)))
    server_safe = TracePolicy.safe().apply(decode_run(body))
    return {"verbatim": verbatim, "client safe": client_safe, "server safe": server_safe}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    arguments = draw(st.dictionaries(KEYS, TREES, min_size=1, max_size=3))
    result = draw(TREES)
    event = draw(TREES)
    texts = {key: draw(rendered(value)) for key, value in arguments.items()}
    texts["result"] = draw(rendered(result))
    texts["event"] = draw(rendered(event))
    agent = (
        {key: draw(variant(value)) for key, value in arguments.items()},
        draw(variant(result)),
        draw(variant(event)),
    )

    def expected(tree: Any) -> Any:
        return draw(variant(near_miss(tree) if draw(st.booleans()) else tree))

    chosen = draw(st.lists(st.sampled_from(sorted(arguments)), min_size=1, unique=True))
    return {
        "arguments": arguments,
        "result": result,
        "event": event,
        "texts": texts,
        "agent": agent,
        "subset": {key: expected(arguments[key]) for key in chosen},
        "exact": {key: expected(value) for key, value in arguments.items()},
        "expected_result": expected(result),
        "expected_event": expected(event),
    }


def assertions(s: dict[str, Any]) -> list[Any]:
    first = next(iter(s["subset"]))
    return [
        CalledTool("lookup", s["subset"]),
        CalledTool("lookup", Exact(s["exact"])),
        CalledTool("lookup", result=s["expected_result"]),
        CalledTool("lookup", s["subset"], result=s["expected_result"], count=1),
        CalledTool("lookup", {first: one_of("never", s["subset"][first])}),
        NotCalledTool("lookup", s["subset"]),
        ToolWasApproved("lookup", s["subset"]),
        EventSeen("seen", data=s["expected_event"]),
        Contains("All"),
        Equals("All done."),
    ]


def verdicts(run: AgentRun, s: dict[str, Any]) -> list[tuple[str, bool, bool]]:
    found = [(a.name, a.evaluate(run)) for a in assertions(s)]
    call_result = Trajectory.of(run).calls_of("lookup")[0].result
    found.append(("expect(result).equals", Equals(s["expected_result"]).evaluate(call_result)))
    return [(name, outcome.passed, outcome.evaluated) for name, outcome in found]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_every_policy_reaches_the_same_verdict(s: dict[str, Any]) -> None:
    runs = three_runs(s["arguments"], s["result"], s["event"], s["texts"], s["agent"])
    seen = {name: verdicts(run, s) for name, run in runs.items()}
    assert seen["client safe"] == seen["verbatim"]
    assert seen["server safe"] == seen["verbatim"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_an_expectation_equal_to_what_the_agent_did_passes_on_every_policy(
    data: st.DataObject,
) -> None:
    arguments = data.draw(st.dictionaries(KEYS, TREES, min_size=1, max_size=3))
    result = data.draw(TREES)
    texts = {key: data.draw(rendered(value)) for key, value in arguments.items()}
    texts["result"] = data.draw(rendered(result))
    texts["event"] = "null"
    agent = (
        {key: data.draw(variant(value)) for key, value in arguments.items()},
        data.draw(variant(result)),
        None,
    )
    expected_args = {key: data.draw(variant(value)) for key, value in arguments.items()}
    expected_result = data.draw(variant(result))
    for name, run in three_runs(arguments, result, None, texts, agent).items():
        for assertion in (
            CalledTool("lookup", expected_args),
            CalledTool("lookup", Exact(expected_args)),
            CalledTool("lookup", result=expected_result),
        ):
            outcome = assertion.evaluate(run)
            assert outcome.passed, (name, assertion.name, outcome.message)


def test_the_issue_example_ten_and_ten_point_zero() -> None:
    # The agent sent value=10.0; the eval expects 10 (and, nested, 1e1 and -0.0 vs 0).
    texts = {"value": "10.0", "nested": '{"b":[1e1,-0.0],"a":1E+2}', "result": "1e1", "event": "0"}
    arguments = {"value": 10.0, "nested": {"b": [10.0, -0.0], "a": 100.0}}
    agent = ({"value": 10.0, "nested": {"a": 100.0, "b": [10.0, -0.0]}}, 10.0, 0)
    runs = three_runs(arguments, 10.0, 0, texts, agent)
    for name, run in runs.items():
        assert CalledTool("lookup", {"value": 10}).evaluate(run).passed, name
        assert CalledTool("lookup", {"nested": {"a": 100, "b": [10, 0]}}).evaluate(run).passed
        assert CalledTool("lookup", result=10).evaluate(run).passed, name
        assert not CalledTool("lookup", {"value": 11}).evaluate(run).passed, name
        assert not CalledTool("lookup", result=True).evaluate(run).passed, name


def test_forms_used_by_the_property_are_equal_numbers() -> None:
    # the test's own generator: every JSON form it writes decodes to the same number
    for value in (0, -0.0, 10, 10.0, 2**53 + 1, 2**70, 1e300, 0.1, -2.5):
        decoded = {msgspec.json.decode(text.encode()) for text in _json_forms(value)}
        assert all(number == value and not math.isnan(number) for number in decoded)
