"""openapi.yaml's streamed turns (protocol 1.2) against evalport.protocol's stream events.

``test_openapi.py`` compares each event's schema (and their union, ``StreamEvent``) with
its Struct; this module checks what has no Struct and the examples:

- ``StreamFrame`` (one Server-Sent Event) names every event of ``STREAM_EVENTS`` and
  ``FINAL_EVENTS``, and gives each name's data its schema: ``StreamEvent`` for the events,
  the turn's ``application/json`` body for ``result``, ``Problem`` for ``problem``.
- Each event's schema has examples, which validate against it and decode as that event.
- The turn operation takes ``Accept`` and ``Last-Event-ID``, its 200 has the
  ``text/event-stream`` content, and ``/health`` describes the ``streaming`` capability.
- The example stream (a ``text`` block in the stream's description: an example of a
  media type must match its schema, which describes one event, so the ``examples`` are
  single frames, each one of that stream's) is one a server writes: ids 1, 2, ..., each
  event's data as the encoder writes it, and a last ``result`` whose data is the whole
  run, its reply the text deltas joined and its steps those of the ``step-completed``
  events.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import yaml
from evalport.protocol import (
    EVENT_STREAM,
    FINAL_EVENTS,
    STREAM_EVENTS,
    STREAMING_CAPABILITY,
    RunEnvelope,
    StepCompleted,
    TextDelta,
    decode_event,
    decode_run,
    encode,
    event_name,
)
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "openapi.yaml").read_text(encoding="utf-8")
)
SCHEMAS: dict[str, Any] = SPEC["components"]["schemas"]
REF = "#/components/schemas/"
TURN = SPEC["paths"]["/evals/sessions/{sessionId}/turns"]["post"]
STREAMED = TURN["responses"]["200"]["content"][EVENT_STREAM]
REGISTRY = Registry().with_resource(
    "urn:evalport:openapi", Resource.from_contents(SPEC, default_specification=DRAFT202012)
)


def _validate(value: Any, schema: dict[str, Any]) -> None:
    """Validate ``value`` against a schema of the spec (its ``$ref``s resolved in the spec)."""
    schema = json.loads(json.dumps(schema).replace('"' + REF, '"urn:evalport:openapi' + REF))
    jsonschema.Draft202012Validator(schema, registry=REGISTRY).validate(value)


def _data_schema(name: str) -> dict[str, Any]:
    """The schema of the data of a frame named ``name``, from ``StreamFrame``'s branches."""
    for branch in SCHEMAS["StreamFrame"]["oneOf"]:
        event = branch["properties"]["event"]
        if name in event.get("enum", []) or name == event.get("const"):
            return dict(branch["properties"]["data"]["contentSchema"])
    raise AssertionError(f"StreamFrame has no branch for {name!r}")


def _frames(text: str) -> list[dict[str, str]]:
    """The events of a ``text/event-stream`` body: each frame's fields (comments left out)."""
    assert text.endswith("\n\n"), "the last frame ends with a blank line"
    frames = []
    for block in text.strip("\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            assert name in ("id", "event", "data") and name not in fields, line
            fields[name] = value
        if fields:
            frames.append(fields)
    return frames


def _kept(again: Any, value: Any) -> bool:
    """Whether ``again`` holds everything ``value`` holds (it may add fields at defaults)."""
    if isinstance(value, dict):
        return isinstance(again, dict) and all(
            key in again and _kept(again[key], item) for key, item in value.items()
        )
    if isinstance(value, list):
        return (
            isinstance(again, list)
            and len(again) == len(value)
            and all(_kept(left, right) for left, right in zip(again, value, strict=True))
        )
    return bool(again == value)


def test_every_event_is_a_stream_frame_name_with_its_data_schema() -> None:
    frame = SCHEMAS["StreamFrame"]
    assert frame["properties"]["event"]["enum"] == [*STREAM_EVENTS, *FINAL_EVENTS]
    mapping = SCHEMAS["StreamEvent"]["discriminator"]["mapping"]
    assert mapping == {name: REF + kind.__name__ for name, kind in STREAM_EVENTS.items()}
    for name in STREAM_EVENTS:
        assert _data_schema(name) == {"$ref": REF + "StreamEvent"}
    run_or_delta = [{"$ref": REF + "RunEnvelope"}, {"$ref": REF + "DeltaEnvelope"}]
    assert _data_schema("result") == {"oneOf": run_or_delta}
    assert _data_schema("problem") == {"$ref": REF + "Problem"}
    assert len(frame["oneOf"]) == 1 + len(FINAL_EVENTS)


@pytest.mark.parametrize("name", list(STREAM_EVENTS))
def test_each_event_example_validates_and_decodes(name: str) -> None:
    kind = STREAM_EVENTS[name]
    examples = SCHEMAS[kind.__name__]["examples"]
    assert examples
    for example in examples:
        _validate(example, {"$ref": REF + kind.__name__})
        _validate(example, {"$ref": REF + "StreamEvent"})
        decoded = decode_event.decode(json.dumps(example))
        assert type(decoded) is kind and event_name(decoded) == name
        assert _kept(msgspec.json.decode(encode(decoded)), example)  # nothing lost


def test_the_turn_asks_for_the_stream_and_resumes_it() -> None:
    names = [p["$ref"].rsplit("/", 1)[1] for p in TURN["parameters"]]
    assert {"Accept", "LastEventId"} <= set(names)
    parameters = SPEC["components"]["parameters"]
    assert parameters["Accept"]["example"] == EVENT_STREAM
    assert parameters["LastEventId"]["name"] == "Last-Event-ID"
    # OpenAPI 3.1: an event stream's schema describes each event (as schemathesis reads it)
    assert STREAMED["schema"]["allOf"] == [{"$ref": REF + "StreamFrame"}]
    for rule in ("Idempotency-Key", "Last-Event-ID", ": keep-alive", "overflow", "problem"):
        assert rule in STREAMED["schema"]["description"], rule
    capabilities = SCHEMAS["Health"]["properties"]["capabilities"]["description"]
    assert f"`{STREAMING_CAPABILITY}`" in capabilities


def _example_stream() -> str:
    """The example stream, from the ``text`` block of the stream's description."""
    blocks = re.findall(r"```text\n(.*?)```", STREAMED["schema"]["description"], re.DOTALL)
    assert len(blocks) == 1
    return blocks[0] + "\n"  # a frame ends with a blank line


@pytest.mark.parametrize("example", list(STREAMED["examples"]))
def test_each_example_is_a_frame_of_the_example_stream(example: str) -> None:
    frame = STREAMED["examples"][example]["value"]
    _validate(frame, {"$ref": REF + "StreamFrame"})
    assert frame in _frames(_example_stream())


def test_the_example_stream_is_what_a_server_writes() -> None:
    frames = _frames(_example_stream())
    *events, last = frames
    assert [frame["id"] for frame in events] == [str(n) for n in range(1, len(frames))]
    assert "id" not in last  # the last event has nothing after it to resume
    decoded = []
    for frame in events:
        _validate(frame, {"$ref": REF + "StreamFrame"})
        _validate(json.loads(frame["data"]), _data_schema(frame["event"]))
        event = decode_event.decode(frame["data"])
        assert event_name(event) == frame["event"]
        assert encode(event).decode() == frame["data"]  # as the encoder writes it
        decoded.append(event)
    assert last["event"] == "result"
    _validate(json.loads(last["data"]), _data_schema("result"))
    run = decode_run(last["data"].encode())
    assert encode(RunEnvelope(run=run)).decode() == last["data"]  # the 200's body, exactly
    text = "".join(event.text for event in decoded if isinstance(event, TextDelta))
    assert text == run.reply
    steps = [event.step for event in decoded if isinstance(event, StepCompleted)]
    assert steps == run.steps
