"""Digests: Instructor's test vectors byte for byte, and the properties that make them safe.

- ``compact_json`` writes exactly ``json.dumps(value, ensure_ascii=False, separators=(",",
  ":"))`` (what Instructor's hashes reproduce) for every JSON value, floats and control
  characters included: that is the byte-for-byte claim.
- ``canonical_json`` (what a digest hashes) is that JSON with sorted keys and integral
  numbers written as integers, so equal JSON values (``10``, ``10.0``, ``1e1``; maps in any
  key order) hash alike; it is ``compact_json`` itself on Instructor's vectors.
- ``digest`` is deterministic, idempotent (a digest passes through unchanged), and its
  preview never exceeds the byte budget nor splits a UTF-8 character.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from evalport.protocol import (
    DEFAULT_PREVIEW_BYTES,
    canonical_json,
    compact_json,
    digest,
    is_digest,
    json_equal,
    matches_digest,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# Text without lone surrogates: those cannot be UTF-8 encoded by anyone.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(TEXT, inner, max_size=6),
    max_leaves=40,
)


def reference_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral(item) for item in value]
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    return value


def reference_canonical(value: Any) -> bytes:
    """Canonical JSON written the slow, obvious way: through the standard library."""
    tree = _integral(json.loads(reference_json(value)))
    return json.dumps(tree, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


@pytest.mark.parametrize(
    ("value", "size", "hash_hex"),
    [
        ({"id": "A1049"}, 14, "eeed0884e001b29968b8aaafb5df5b7a62d20169acde3325d7cf204812e1098c"),
        ("found A1049", 13, "cca20afd098f7d7d93bae2191aa3f7d3d5fdc10050928bd2aab4f9b8ce67e252"),
    ],
)
def test_instructor_hash_vectors(value: Any, size: int, hash_hex: str) -> None:
    result = digest(value)
    assert result["bytes"] == size
    assert result["hash"] == f"sha256:{hash_hex}"
    assert list(result) == ["hash", "bytes", "preview"]


@pytest.mark.parametrize(
    ("value", "size", "preview"),
    [
        ({"card": "SECRET-4111111111111111"}, 34, '{"card":"<string:23>"}'),
        (
            {"user": {"id": 7, "ssn": "123-45-6789"}, "rows": [1, 2, 3]},
            None,
            '{"user":{"id":"<int>","ssn":"<string:11>"},"rows":"<array:3>"}',
        ),
    ],
)
def test_instructor_preview_vectors(value: Any, size: int | None, preview: str) -> None:
    result = digest(value)
    assert result["preview"] == preview
    if size is not None:
        assert result["bytes"] == size


@pytest.mark.parametrize(
    ("value", "preview"),
    [
        ("héllo", '"<string:6>"'),
        (3, '"<int>"'),
        (2.5, '"<float>"'),
        (True, '"<bool>"'),
        (None, '"<null>"'),
        ([], '"<array:0>"'),
        ({}, "{}"),
        ({"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}, None),
    ],
)
def test_shapes(value: Any, preview: str | None) -> None:
    result = digest(value)
    if preview is not None:
        assert result["preview"] == preview
    else:  # maps are kept to depth 6; the seventh becomes "<object:N>"
        assert result["preview"] == ('{"a":{"b":{"c":{"d":{"e":{"f":"<object:1>"}}}}}}')


def test_slashes_and_non_ascii_stay_unescaped() -> None:
    assert compact_json({"url": "a/b", "name": "Zoë"}) == '{"url":"a/b","name":"Zoë"}'.encode()
    assert digest("Zoë")["bytes"] == len('"Zoë"'.encode())


@pytest.mark.parametrize(
    "value",
    [
        *(1e16, 1e-07, 1e22, 1.7976931348623157e308, 5e-324, -0.0, float("nan"), float("inf")),
        *({"1e16": 1e16}, [1.5e300, "x:1e5"], 2**70, {1: "int key"}, {2.5: "float key"}),
        *(1e-05, -9.99e-05, 1e-4, 0.00012, 1.5e16, 9999999999999998.0, {1e-05: "key"}),
    ],
)
def test_compact_json_edge_values(value: Any) -> None:
    assert compact_json(value) == reference_json(value)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_compact_json_is_json_dumps_byte_for_byte(value: Any) -> None:
    assert compact_json(value) == reference_json(value)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(), max_size=8))
def test_compact_json_writes_every_float_as_python_does(values: list[float]) -> None:
    assert compact_json(values) == reference_json(values)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_digest_is_deterministic_and_hashes_the_canonical_json(value: Any) -> None:
    first = digest(value)
    assert digest(copy.deepcopy(value)) == first
    data = reference_canonical(value)
    assert first["hash"] == "sha256:" + hashlib.sha256(data).hexdigest()
    assert first["bytes"] == len(data)
    assert is_digest(first)
    assert matches_digest(copy.deepcopy(value), first)


@settings(max_examples=200, deadline=None)
@given(JSON, st.integers(min_value=0, max_value=200))
def test_a_digest_passes_through_unchanged(value: Any, budget: int) -> None:
    once = digest(value, budget)
    assert digest(once) is once
    assert digest(once, 5) == once
    assert matches_digest(value, once)


@settings(max_examples=300, deadline=None)
@given(JSON, st.integers(min_value=0, max_value=200))
def test_preview_fits_the_budget_and_never_splits_a_character(value: Any, budget: int) -> None:
    preview = digest(value, budget)["preview"]
    encoded = preview.encode()  # a split character would not survive as text
    assert len(encoded) <= budget
    full = digest(value, 10**9)["preview"].encode()
    assert full.startswith(encoded)
    if len(encoded) < len(full):
        # Cut at the last character boundary that fits: one more character would not.
        rest = full[len(encoded) :].decode()
        assert len(encoded) + len(rest[0].encode()) > budget


def test_default_budget_is_120_bytes() -> None:
    assert DEFAULT_PREVIEW_BYTES == 120
    wide = {f"key{i}": "é" * i for i in range(40)}
    preview = digest(wide)["preview"]
    assert 110 < len(preview.encode()) <= 120


def test_is_digest_is_exact() -> None:
    good = {"hash": "sha256:" + "0" * 64, "bytes": 2, "preview": '"<int>"'}
    assert is_digest(good)
    assert not is_digest({**good, "extra": 1})
    assert not is_digest({**good, "hash": "md5:00"})
    assert not is_digest({"hash": "sha256:0", "bytes": 1})
    assert not is_digest('{"hash": "sha256:0", "bytes": 1, "preview": ""}')


def test_matches_digest_against_plain_values() -> None:
    assert matches_digest("A1", "A1")
    assert not matches_digest("A1", "A2")
    assert not matches_digest("A2", digest("A1"))
    assert matches_digest(digest("A1"), digest("A1"))


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_canonical_json_is_the_reference_canonical_form(value: Any) -> None:
    assert canonical_json(value) == reference_canonical(value)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (10, 10.0),
        (10, 1e1),
        (0, -0.0),
        (2**70, float(2**70)),
        ({"a": 1, "b": [1.0, {"c": 2, "d": 3}]}, {"b": [1, {"d": 3.0, "c": 2}], "a": 1.0}),
        ([1, (2, 3)], [1.0, [2, 3]]),
    ],
)
def test_equal_json_values_digest_alike(left: Any, right: Any) -> None:
    assert canonical_json(left) == canonical_json(right)
    assert digest(left)["hash"] == digest(right)["hash"]
    assert digest(left)["bytes"] == digest(right)["bytes"]
    assert matches_digest(left, digest(right)) and matches_digest(right, digest(left))
    assert json_equal(left, right)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (True, 1),
        (False, 0),
        (1, "1"),
        (2**70 + 1, float(2**70)),
        (0.1, 0.1000001),
        ([1, 2], [2, 1]),
    ],
)
def test_different_json_values_digest_apart(left: Any, right: Any) -> None:
    assert digest(left)["hash"] != digest(right)["hash"]
    assert not matches_digest(left, digest(right))
    assert not json_equal(left, right)


def test_a_digest_made_over_the_written_json_still_matches() -> None:
    # Instructor (and evalport before the canonical form) hashed the JSON as written.
    written = {"b": 1.5, "a": 10.0}
    data = reference_json(written)
    recorded = {
        "hash": "sha256:" + hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "preview": "",
    }
    assert matches_digest({"b": 1.5, "a": 10.0}, recorded)
    assert not matches_digest({"b": 1.5, "a": 11.0}, recorded)
    assert matches_digest(recorded, {"b": 1.5, "a": 10.0})  # either side may be the digest


def test_canonical_json_of_instructor_vectors_is_their_compact_json() -> None:
    for value in ({"id": "A1049"}, "found A1049", {"card": "SECRET-4111111111111111"}):
        assert canonical_json(value) == compact_json(value)


def _digest_of(text: str) -> dict[str, object]:
    """A digest as another implementation makes it: sha256 of the JSON text it wrote."""
    data = text.encode()
    return {
        "hash": "sha256:" + hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "preview": "?",
    }


@pytest.mark.parametrize(
    ("value", "written"),
    [
        # PHP's json_encode: keys in the order given, an integral float as an integer
        ({"refunded": 24.5, "refundable_left": 0.0}, '{"refunded":24.5,"refundable_left":0}'),
        ({"total": 349.0}, '{"total":349}'),
        ({"b": 1, "a": [2.0, {"d": 3.0, "c": "x"}]}, '{"b":1,"a":[2,{"d":3,"c":"x"}]}'),
        # keys sorted (a canonical writer), integral numbers kept as written
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        # a server that writes every number as a float: 42 in the eval, 42.0 on the wire
        (42, "42.0"),
        ({"qty": 2, "items": [1, 2]}, '{"qty":2.0,"items":[1.0,2.0]}'),
        ({"qty": 2, "items": [1, 2]}, '{"items":[1.0,2.0],"qty":2.0}'),
    ],
)
def test_digests_other_implementations_make_of_the_same_value_match(
    value: object, written: str
) -> None:
    assert matches_digest(value, _digest_of(written))
    assert matches_digest(_digest_of(written), value)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ({"refunded": 24.5, "refundable_left": 0.5}, '{"refunded":24.5,"refundable_left":0}'),
        (43, "42.0"),
        ({"a": "1"}, '{"a":1}'),
        ([1, 2], "[2,1]"),
    ],
)
def test_another_value_never_matches(value: object, written: str) -> None:
    assert not matches_digest(value, _digest_of(written))
