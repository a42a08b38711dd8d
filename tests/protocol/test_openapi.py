"""openapi.yaml: a valid OpenAPI 3.1 document that says what evalport.protocol does.

The schema comparison (``test_schemas_match_the_structs``) derives JSON Schema components
from every wire Struct that :mod:`evalport.protocol` exports (those of ``models`` and
``messages``, and every event of ``STREAM_EVENTS`` with their union, ``StreamEvent``)
(``msgspec.json.schema_components``)
and compares them with ``components/schemas`` of the spec, recursively:

- both sides have the same set of schemas (the spec may add only ``SPEC_ONLY`` ones), and
  each schema the same property names, ``required`` set, types, nullability (``anyOf``
  branches in order), ``$ref`` targets, array items, map values, ``additionalProperties``
  and defaults. A field renamed, added or removed on either side fails.
- the spec may add annotations the code cannot express: ``description``, ``title``,
  ``examples``, ``format``, ``pattern``, ``x-*``; an ``allOf`` of a ``oneOf`` whose
  branches only list ``required`` fields (which fields must be present together, as
  ``ToolFault``'s ``error``/``result``: a rule the Struct enforces in ``__post_init__``,
  which msgspec cannot put in its schema), or of such an ``anyOf`` (at least one of
  ``TurnRequest``'s ``message`` and ``parts``) (under ``allOf``, since generators read a
  top-level ``oneOf``/``anyOf`` as a union and give the body no model), or a
  ``dependentRequired`` among the code's fields (an inline part's ``mediaType``).
- the spec writes some fields in the forms other tools need (``_as_code`` undoes them):
  a field that is a plain ``str`` in the code with known values is an open enum,
  ``anyOf: [{enum: [...]}, {type: string}]`` (the run model keeps enumerated values as
  text so that clients keep values a newer server invents; a closed ``enum`` there
  fails); a payload that is any value in the code and that the trace policy may digest
  may be typed, ``anyOf`` with a ``Digest`` branch (the error texts); an
  object of any keys says ``additionalProperties: true`` (openapi-typescript reads a
  bare ``type: object`` as an empty one); and a field that may be absent (of a request
  body, or of a Struct that leaves defaults out) has no ``default`` (openapi-typescript
  types a field with one as always present). Where the code has an ``enum`` (a
  ``Literal``), the spec's must be identical.
- the stream events' union is msgspec's ``anyOf`` with its ``discriminator`` on ``event``,
  written ``oneOf`` in the spec (the tags make the branches exclusive), same branches in the
  same order. ``StreamFrame`` (one Server-Sent Event) has no Struct: its test is
  ``test_openapi_stream.py``, which also checks the streamed example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import evalport.protocol as protocol
import jsonschema
import msgspec
import pytest
import yaml
from evalport.protocol import (
    EVENT_STREAM,
    STREAM_EVENTS,
    ApprovalsRequest,
    ApprovalState,
    CreateSessionRequest,
    CreateSessionResponse,
    DeltaEnvelope,
    FinishReason,
    Health,
    Problem,
    ProblemType,
    RunEnvelope,
    RunStatus,
    StepType,
    StopReason,
    StreamEvent,
    TurnRequest,
    decode_request,
    decode_response,
    decode_run,
)
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).resolve().parents[2] / "openapi.yaml"
SPEC: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text())
SCHEMAS: dict[str, Any] = SPEC["components"]["schemas"]
SPEC_ONLY = {"Digest", "StreamFrame"}
ANNOTATIONS = {"description", "title", "examples", "format", "pattern"}
REF = "#/components/schemas/"
# The modules whose Structs travel on the wire (others, such as the recorder's, do not).
WIRE_MODULES = {"evalport.protocol._models", "evalport.protocol._messages"}

# The 200 of a turn and of an attach: the whole run, or a delta when asked (``?since=``).
RUN_OR_DELTA = {"oneOf": [{"$ref": REF + "RunEnvelope"}, {"$ref": REF + "DeltaEnvelope"}]}
ANSWERS_DELTAS = {
    ("/evals/sessions/{sessionId}/turns", "post"),
    ("/evals/sessions/{sessionId}", "get"),
}

# Every route of DESIGN.md's table: request body, success status and body, problem statuses.
ROUTES: dict[tuple[str, str], tuple[type | None, str, type | None, set[int]]] = {
    ("/health", "get"): (None, "200", Health, {401, 503}),
    ("/evals/sessions", "post"): (
        CreateSessionRequest,
        "201",
        CreateSessionResponse,
        {400, 401, 413, 415, 422, 429, 503},
    ),
    ("/evals/sessions/{sessionId}/turns", "post"): (
        TurnRequest,
        "200",
        RunEnvelope,
        {400, 401, 404, 409, 413, 415, 422, 429, 503, 504},
    ),
    ("/evals/sessions/{sessionId}", "get"): (None, "200", RunEnvelope, {401, 404, 422, 429, 503}),
    ("/evals/sessions/{sessionId}", "delete"): (None, "204", None, {401, 404, 409, 429, 503}),
    ("/evals/sessions/{sessionId}/approvals", "post"): (
        ApprovalsRequest,
        "200",
        RunEnvelope,
        {400, 401, 404, 409, 413, 415, 422, 429, 503, 504},
    ),
}


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` (responses, examples, parameters, headers)."""
    while "$ref" in node:
        target: Any = SPEC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in SPEC["paths"].items()
        for method, operation in item.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]


def _code_components() -> dict[str, Any]:
    structs = [
        value
        for name in protocol.__all__
        if isinstance(value := getattr(protocol, name), type)
        and issubclass(value, msgspec.Struct)
        and value.__module__ in WIRE_MODULES
    ]
    (union, *_), components = msgspec.json.schema_components(
        [StreamEvent, *structs, *STREAM_EVENTS.values()], ref_template=REF + "{name}"
    )
    components["StreamEvent"] = {"oneOf": union["anyOf"], "discriminator": union["discriminator"]}
    return components


def _presence_only(branches: Any, code: dict[str, Any]) -> bool:
    """Whether a spec-only ``oneOf`` only says which of the code's fields must be present."""
    properties = code.get("properties", {})
    return isinstance(branches, list) and all(
        isinstance(branch, dict)
        and set(branch) == {"required"}
        and all(name in properties for name in branch["required"])
        for branch in branches
    )


def _presence_condition(spec: dict[str, Any], code: dict[str, Any]) -> bool:
    """Whether a spec-only ``if``/``then``/``else`` only says which of the code's fields
    must be present (or absent) depending on the value of one of them."""
    properties = code.get("properties", {})
    condition = spec.get("if", {}).get("properties", {})
    present = spec.get("then", {})
    absent = spec.get("else", {}).get("not", {})
    return (
        set(spec.get("if", {})) == {"properties"}
        and len(condition) == 1
        and all(name in properties and set(rule) == {"const"} for name, rule in condition.items())
        and _presence_only([present], code)
        and set(spec.get("else", {})) == {"not"}
        and _presence_only([absent], code)
    )


def _presence_rules(rules: Any, code: dict[str, Any]) -> bool:
    """Whether a spec-only ``allOf`` only holds ``oneOf``/``anyOf`` presence rules."""
    return isinstance(rules, list) and all(
        isinstance(rule, dict)
        and len(rule) == 1
        and next(iter(rule)) in ("oneOf", "anyOf")
        and _presence_only(next(iter(rule.values())), code)
        for rule in rules
    )


def _as_code(code: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A spec node as msgspec would write it, the forms it takes for other tools undone:
    an open enum (``anyOf`` the known values, then any string) is a string; a payload
    that is any value in the code and that the trace policy may digest is typed in the
    spec (``anyOf`` with a ``Digest`` branch: the error texts); an explicit
    ``additionalProperties: true`` is JSON Schema's default."""
    node = dict(spec)
    branches = node.get("anyOf")
    payload = not {"type", "anyOf", "$ref"} & set(code)
    if isinstance(branches, list) and payload and {"$ref": REF + "Digest"} in branches:
        del node["anyOf"]
    elif isinstance(branches, list):
        known = branches[0] if branches else None
        if (
            isinstance(known, dict)
            and set(known) == {"type", "enum"}
            and known["type"] == "string"
            and branches[1:2] == [{"type": "string"}]
        ):
            branches = branches[1:]
        del node["anyOf"]
        if len(branches) == 1:
            node.update(branches[0])
        else:
            node["anyOf"] = branches
    if node.get("additionalProperties") is True:
        del node["additionalProperties"]
    return node


def _compare(code: Any, spec: Any, where: str) -> list[str]:
    if not isinstance(code, dict) or not isinstance(spec, dict):
        return [] if code == spec else [f"{where}: code {code!r} != spec {spec!r}"]
    spec = _as_code(code, spec)
    problems: list[str] = []
    keys = (set(code) | set(spec)) - ANNOTATIONS
    for key in sorted(keys):
        if key.startswith("x-"):
            continue
        if key in ("oneOf", "anyOf") and key not in code and _presence_only(spec[key], code):
            continue
        if key == "allOf" and key not in code and _presence_rules(spec[key], code):
            continue
        if key in ("if", "then", "else") and key not in code and _presence_condition(spec, code):
            continue
        if (
            key == "dependentRequired"
            and key not in code
            and _presence_only(
                [{"required": [name, *names]} for name, names in spec[key].items()], code
            )
        ):
            continue
        if key not in code or key not in spec:
            if key == "required" and not code.get(key) and not spec.get(key):
                continue
            side = "spec" if key not in code else "code"
            problems.append(f"{where}: {key!r} only in the {side}")
            continue
        if key == "properties":
            names_code, names_spec = set(code[key]), set(spec[key])
            if names_code != names_spec:
                problems.append(
                    f"{where}: properties only in code {sorted(names_code - names_spec)}, "
                    f"only in spec {sorted(names_spec - names_code)}"
                )
            for name in sorted(names_code & names_spec):
                problems += _compare(code[key][name], spec[key][name], f"{where}.{name}")
        elif key == "required":
            if set(code[key]) != set(spec[key]):
                problems.append(f"{where}: required {code[key]} != {spec[key]}")
        elif key == "anyOf":
            if len(code[key]) != len(spec[key]):
                problems.append(f"{where}: anyOf {code[key]} != {spec[key]}")
            for index, (left, right) in enumerate(zip(code[key], spec[key], strict=False)):
                problems += _compare(left, right, f"{where}|{index}")
        else:
            problems += _compare(code[key], spec[key], f"{where}/{key}")
    return problems


def test_spec_is_valid_openapi_3_1() -> None:
    assert SPEC["openapi"].startswith("3.1.")
    validate(SPEC)


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        own = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return own.union(*(refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(value) for value in node))
    return set()


def request_schemas() -> set[str]:
    """The schemas of request bodies, and those they hold."""
    names: set[str] = set()
    todo = [
        ref
        for _, _, operation in operations()
        for media in operation.get("requestBody", {}).get("content", {}).values()
        for ref in refs(media["schema"])
    ]
    while todo:
        name = todo.pop().removeprefix(REF)
        if name not in names:
            names.add(name)
            todo += refs(SCHEMAS[name])
    return names


def left_out_at_defaults() -> set[str]:
    """The wire Structs that leave a field at its default out (``omit_defaults``)."""
    return {
        name
        for name in protocol.__all__
        if isinstance(kind := getattr(protocol, name), type)
        and issubclass(kind, msgspec.Struct)
        and kind.__module__ in WIRE_MODULES
        and kind.__struct_config__.omit_defaults
    }


# Fields another implementation leaves out, although evalport sends them.
ABSENT_FIELDS = {("Health", "evalportVersion")}


def may_be_absent() -> set[tuple[str, str]]:
    """(schema, field) of every field that may be absent from a body: those of requests,
    of Structs that leave defaults out, and :data:`ABSENT_FIELDS`."""
    return ABSENT_FIELDS | {
        (name, field)
        for name in request_schemas() | left_out_at_defaults()
        for field in SCHEMAS[name].get("properties", {})
    }


def test_schemas_match_the_structs() -> None:
    code = _code_components()
    assert set(code) == set(SCHEMAS) - SPEC_ONLY
    for name, field in may_be_absent():
        # what an absent field means is in its description (see the test below)
        code[name]["properties"][field].pop("default", None)
    problems: list[str] = []
    for name in sorted(code):
        problems += _compare(code[name], SCHEMAS[name], name)
    assert problems == []


@pytest.mark.parametrize(
    ("schema", "prop", "known"),
    [
        ("AgentRun", "status", RunStatus.ALL),
        ("Step", "type", StepType.ALL),
        ("Step", "finishReason", FinishReason.ALL),
        ("StopSignal", "reason", StopReason.ALL),
        ("Approval", "state", ApprovalState.ALL),
    ],
)
def test_enumerated_text_fields_are_open_and_list_the_known_values(
    schema: str, prop: str, known: tuple[str, ...]
) -> None:
    """Clients keep an unknown value as text (the spec says so): the known values, or any
    string (a closed enum makes generated clients raise on a value a newer server sends)."""
    node = SCHEMAS[schema]["properties"][prop]
    assert node["anyOf"][:2] == [{"type": "string", "enum": list(known)}, {"type": "string"}]


def test_comparison_catches_drift() -> None:
    code = _code_components()["TurnRequest"]
    renamed = {**SCHEMAS["TurnRequest"], "properties": {"text": {"type": "string"}}}
    assert _compare(code, renamed, "TurnRequest")
    retyped = {**SCHEMAS["TurnRequest"], "properties": {"message": {"type": "integer"}}}
    assert _compare(code, retyped, "TurnRequest")
    approvals = _code_components()["ApprovalsRequest"]
    optional = {k: v for k, v in SCHEMAS["ApprovalsRequest"].items() if k != "required"}
    assert _compare(approvals, optional, "ApprovalsRequest")
    either = {**SCHEMAS["TurnRequest"], "anyOf": [{"required": ["message"]}, {"required": ["x"]}]}
    assert _compare(code, either, "TurnRequest")
    delta = _code_components()["TextDelta"]
    grown = dict(SCHEMAS["TextDelta"])
    grown["properties"] = {**grown["properties"], "html": {"type": "string"}}
    assert _compare(delta, grown, "TextDelta")
    union = _code_components()["StreamEvent"]
    fewer = {**SCHEMAS["StreamEvent"], "oneOf": SCHEMAS["StreamEvent"]["oneOf"][:-1]}
    assert _compare(union, fewer, "StreamEvent")
    assert _compare(code, either, "TurnRequest")
    run = _code_components()["AgentRun"]
    not_nullable = dict(SCHEMAS["AgentRun"])
    not_nullable["properties"] = {**not_nullable["properties"], "stopSignal": {"$ref": REF + "X"}}
    assert _compare(run, not_nullable, "AgentRun")
    fault = _code_components()["ToolFault"]
    unknown = {**SCHEMAS["ToolFault"], "oneOf": [{"required": ["error"]}, {"required": ["why"]}]}
    assert _compare(fault, unknown, "ToolFault")
    typed = {**SCHEMAS["ToolFault"], "oneOf": [{"required": ["error"], "type": "object"}]}
    assert _compare(fault, typed, "ToolFault")
    rule = {**SCHEMAS["ToolFault"], "allOf": [{"oneOf": [{"required": ["why"]}]}]}
    assert _compare(fault, rule, "ToolFault")
    closed = dict(SCHEMAS["AgentRun"])
    closed["properties"] = {
        **closed["properties"],
        "status": {"type": "string", "enum": list(RunStatus.ALL), "default": "pending"},
    }
    assert _compare(run, closed, "AgentRun")
    renamed_digest = dict(SCHEMAS["ErrorInfo"])
    renamed_digest["properties"] = {**renamed_digest["properties"], "message": {"type": "string"}}
    assert _compare(_code_components()["ErrorInfo"], renamed_digest, "ErrorInfo")


def test_every_route_of_the_design_with_its_bodies_and_statuses() -> None:
    found = {(path, method) for path, method, _ in operations()}
    assert found == set(ROUTES)
    for (path, method), (request, success, response, errors) in ROUTES.items():
        operation = SPEC["paths"][path][method]
        assert operation["operationId"]
        if request is None:
            assert "requestBody" not in operation
        else:
            body = operation["requestBody"]["content"]["application/json"]["schema"]
            assert body == {"$ref": REF + request.__name__}
        statuses = {int(status) for status in operation["responses"]}
        assert statuses == {int(success)} | errors, (path, method)
        ok = operation["responses"][success]
        if response is None:
            assert "content" not in ok
        else:
            schema = ok["content"]["application/json"]["schema"]
            if (path, method) in ANSWERS_DELTAS:
                assert schema == RUN_OR_DELTA
            else:
                assert schema == {"$ref": REF + response.__name__}
        for status in errors:
            problem = _resolve(operation["responses"][str(status)])
            media = problem["content"]["application/problem+json"]
            assert media["schema"] == {"$ref": REF + "Problem"}


def test_problem_types_statuses_and_headers() -> None:
    assert SPEC["components"]["x-problem-types"] == ProblemType.STATUS
    responses = SPEC["components"]["responses"]
    documented = {int(status) for status in responses}
    routed = {status for *_, errors in ROUTES.values() for status in errors}
    assert documented == routed
    # Every problem a route can return is documented, except those that belong to no route:
    # 404 not-found (unknown path), 405 (wrong method), 500 (a server bug) and 403 (what
    # `serve --insecure-no-auth` answers a caller not on this machine, in front of every route).
    unrouted = {
        ProblemType.FORBIDDEN,
        ProblemType.NOT_FOUND,
        ProblemType.METHOD_NOT_ALLOWED,
        ProblemType.INTERNAL,
    }
    for problem_type, status in ProblemType.STATUS.items():
        if problem_type in unrouted:
            continue
        assert status in documented, problem_type
        examples = responses[str(status)]["content"]["application/problem+json"]["examples"]
        described = responses[str(status)]["description"]
        slug = problem_type.rsplit(":", 1)[1]
        assert slug in described or any(
            example["value"]["type"] == problem_type for example in examples.values()
        ), problem_type
    for status in (429, 503):
        assert set(responses[str(status)]["headers"]) == {"Retry-After"}
    assert set(responses["401"]["headers"]) == {"WWW-Authenticate"}


def test_security_and_idempotency_key() -> None:
    scheme = SPEC["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert SPEC["security"] == [{"bearerAuth": []}]
    turn = SPEC["paths"]["/evals/sessions/{sessionId}/turns"]["post"]
    attach = SPEC["paths"]["/evals/sessions/{sessionId}"]["get"]
    key, since, accept, last = [_resolve(p) for p in turn["parameters"]]
    assert (key["name"], key["in"]) == ("Idempotency-Key", "header")
    assert (since["name"], since["in"]) == ("since", "query")
    assert (accept["name"], accept["in"], accept["example"]) == ("Accept", "header", EVENT_STREAM)
    assert (last["name"], last["in"]) == ("Last-Event-ID", "header")
    assert [_resolve(p) for p in attach["parameters"]] == [since]


def _registry() -> Registry:
    resource = Resource.from_contents(SPEC, default_specification=DRAFT202012)
    return Registry().with_resource("urn:evalport:openapi", resource)


def _examples() -> list[tuple[str, str, int | None, Any, Any]]:
    """(operation id, media type, status or None for a request, schema, example value)."""
    found = []
    for _, _, operation in operations():
        bodies: list[tuple[int | None, dict[str, Any]]] = []
        if "requestBody" in operation:
            bodies.append((None, operation["requestBody"]))
        bodies += [(int(s), _resolve(r)) for s, r in operation["responses"].items()]
        for status, body in bodies:
            for media_type, media in body.get("content", {}).items():
                examples = media.get("examples", {})
                assert examples, (operation["operationId"], status, media_type)
                if media_type == EVENT_STREAM:
                    continue  # a stream of events, not one JSON body: test_openapi_stream.py
                for example in examples.values():
                    value = _resolve(example)["value"]
                    found.append(
                        (operation["operationId"], media_type, status, media["schema"], value)
                    )
    return found


EXAMPLES = _examples()


def _kept(again: Any, value: Any) -> bool:
    """Whether ``again`` holds everything ``value`` holds (it may add fields at defaults)."""
    if isinstance(value, dict):
        return isinstance(again, dict) and all(
            key in again and _kept(again[key], item) for key, item in value.items()
        )
    return bool(again == value)


def test_every_operation_has_examples() -> None:
    named = {operation["operationId"] for _, _, operation in operations()}
    assert {operation for operation, *_ in EXAMPLES} == named
    for _, _, operation in operations():
        for status, response in operation["responses"].items():
            if status.startswith("2") and status != "204":
                assert "examples" in response["content"]["application/json"]


@pytest.mark.parametrize(
    ("operation", "media_type", "status", "schema", "value"),
    EXAMPLES,
    ids=[f"{e[0]}-{e[2] or 'request'}-{i}" for i, e in enumerate(EXAMPLES)],
)
def test_examples_validate_and_decode(
    operation: str, media_type: str, status: int | None, schema: Any, value: Any
) -> None:
    if schema == RUN_OR_DELTA:
        schema = schema["oneOf"][1 if "delta" in value else 0]
    ref = {"$ref": "urn:evalport:openapi" + schema["$ref"]}
    jsonschema.Draft202012Validator(ref, registry=_registry()).validate(value)
    kind = getattr(protocol, schema["$ref"].removeprefix(REF))
    assert kind in (RunEnvelope, DeltaEnvelope) or "delta" not in value
    data = msgspec.json.encode(value)
    if status is None:
        decoded = decode_request(data, kind)
    elif kind is RunEnvelope:
        decoded = decode_run(data)
        assert msgspec.to_builtins(decoded) == value["run"]
    elif kind is DeltaEnvelope:
        decoded = protocol.decode_answer(data)
        assert msgspec.to_builtins(decoded)["since"] == value["delta"]["since"]
    else:
        decoded = decode_response(data, kind)
    if kind not in (RunEnvelope, DeltaEnvelope, Problem):
        # Re-encoded, every field of the example is still there with its value.
        assert _kept(msgspec.json.decode(protocol.encode(decoded)), value)


def test_digest_schema_matches_digest_function() -> None:
    validator = jsonschema.Draft202012Validator(SCHEMAS["Digest"])
    for value in ("found A1049", {"id": "A1049"}, [1, 2.5, None], "é" * 200):
        validator.validate(protocol.digest(value))
    assert protocol.is_digest(SCHEMAS["Digest"]["examples"][0])
