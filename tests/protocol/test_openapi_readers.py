"""openapi.yaml as other people's tools read it: generators get a model for every body
(no field typed present that a body may leave out, no object typed empty, no two names
that collide once camel-cased without a mapping), and linters find every schema used.
The tools themselves run in ``test_openapi_tools.py``; the spec and its examples are
``test_openapi.py``'s.
"""

from __future__ import annotations

from typing import Any

from test_openapi import (
    EXAMPLES,
    REF,
    SCHEMAS,
    SPEC,
    left_out_at_defaults,
    may_be_absent,
    refs,
    request_schemas,
)


def _schema_nodes(node: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Every schema object under ``node`` (a schema), with where it is."""
    if not isinstance(node, dict):
        return []
    found = [(where, node)]
    for key, value in node.items():
        if key in ("properties", "dependentRequired") and isinstance(value, dict):
            for name, sub in value.items():
                found += _schema_nodes(sub, f"{where}.{name}")
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            for index, sub in enumerate(value):
                found += _schema_nodes(sub, f"{where}|{key}[{index}]")
        elif key in ("items", "additionalProperties", "not", "if", "then", "else"):
            found += _schema_nodes(value, f"{where}/{key}")
    return found


def test_request_schemas_are_found() -> None:
    assert {"TurnRequest", "ImagePart", "ToolFault", "ApprovalDecision"} <= request_schemas()
    assert "AgentRun" not in request_schemas()
    assert {"ToolRecord", "UserPart", "Problem"} <= left_out_at_defaults()


def test_fields_that_may_be_absent_carry_no_default() -> None:
    """openapi-typescript types a field with a ``default`` as always present: a request's
    fields may be left out, and so may those of a Struct that leaves defaults out. What
    an absent field means is in its description instead."""
    with_default = sorted(
        f"{name}.{field}"
        for name, field in may_be_absent()
        if "default" in SCHEMAS[name]["properties"][field]
    )
    assert with_default == []


def _missing_fields(schema: dict[str, Any], value: Any, where: str) -> list[str]:
    """The fields with a ``default`` that ``value`` leaves out, under ``schema``."""
    name = schema["$ref"].removeprefix(REF) if "$ref" in schema else None
    schema = SCHEMAS[name] if name else schema
    if isinstance(value, list) and "items" in schema:
        return [
            missing
            for index, item in enumerate(value)
            for missing in _missing_fields(schema["items"], item, f"{where}[{index}]")
        ]
    if not isinstance(value, dict):
        return []
    missing: list[str] = []
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
        if "$ref" in branch and (branch["$ref"] == REF + "DeltaEnvelope") == ("delta" in value):
            missing += _missing_fields(branch, value, where)
    for field, node in schema.get("properties", {}).items():
        if field in value:
            missing += _missing_fields(node, value[field], f"{where}.{field}")
        elif "default" in node and (name, field) not in may_be_absent():
            missing.append(f"{where}.{field}")
    return missing


def test_response_examples_hold_every_field_a_server_sends() -> None:
    """A response example, and an example of a schema a server sends (a stream's event),
    holds every field with a ``default`` (evalport sends them all), so that, typed from
    the spec as openapi-typescript types it, it compiles."""
    missing = [
        field
        for operation, _, status, schema, value in EXAMPLES
        if status is not None
        for field in _missing_fields(schema, value, f"{operation} {status}")
    ]
    missing += [
        field
        for name, schema in SCHEMAS.items()
        if name not in request_schemas()
        for index, value in enumerate(schema.get("examples", []))
        for field in _missing_fields({"$ref": REF + name}, value, f"{name}[{index}]")
    ]
    assert missing == []


def test_no_object_is_typed_as_an_empty_one() -> None:
    """A bare ``type: object`` is ``Record<string, never>`` to openapi-typescript: an
    object of any keys says so (``additionalProperties: true``)."""
    bare = [
        where
        for name, schema in SCHEMAS.items()
        for where, node in _schema_nodes(schema, name)
        if node.get("type") == "object"
        and not {"properties", "additionalProperties", "patternProperties"} & set(node)
    ]
    assert bare == []


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def test_names_that_collide_once_camel_cased_say_how_to_map_them() -> None:
    """openapi-generator camel-cases property names: ``Message.tool_calls`` (Instructor's
    key) and ``toolCalls`` would be one name; the description gives the mapping."""
    collisions = {}
    for name, schema in SCHEMAS.items():
        properties = list(schema.get("properties", {}))
        camel = [_camel(prop) for prop in properties]
        clashing = [p for p in properties if "_" in p and camel.count(_camel(p)) > 1]
        if clashing:
            collisions[name] = clashing
    assert collisions == {"Message": ["tool_calls"]}
    for name, clashing in collisions.items():
        described = SCHEMAS[name]["description"]
        assert "--name-mappings" in described
        assert all(f"{prop}=" in described for prop in clashing)


def test_every_schema_is_used() -> None:
    """Each component schema is referenced (Redocly's and Spectral's unused-component
    rules): ``Digest`` where a payload may be digested."""
    unused = [name for name in SCHEMAS if REF + name not in refs(SPEC)]
    assert unused == []
