"""Digests: a value replaced by its hash, size and shape.

Format (shared with Instructor's ``EvalTracePolicy::safe()``, byte for byte)::

    {"hash": "sha256:<64 hex>", "bytes": N, "preview": "<shape>"}

- The hash and ``bytes`` are over the value's **canonical JSON** (:func:`canonical_json`):
  compact JSON (no spaces, ``/`` and non-ASCII left unescaped; a string is hashed with its
  quotes) in which equal JSON values are equal text: object keys sorted by code point, and
  a number with an integral value written as an integer (``10.0``, ``1e1`` -> ``10``,
  ``-0.0`` -> ``0``; other floats as Python writes them, integers exactly, however big).
  So ``digest(10)`` and ``digest(10.0)`` hash alike, and so do two maps that differ only
  in key order. For strings, integers, booleans, null and maps with sorted keys and no
  integral float (Instructor's test vectors among them) this is Instructor's compact JSON
  byte for byte.
- Matching (:func:`matches_digest`) compares hashes; a plain value also matches the hash of
  its compact JSON as written, so digests made before the canonical form (or by
  Instructor) still match the values they were made from. Two plain values match when
  they are the same JSON value (:func:`json_equal`): the rule a digest's hash follows, so
  a verdict is the same on a run seen verbatim and on a digested one.
- The preview is the value's *shape* encoded the same way: a string becomes
  ``"<string:N>"`` (N UTF-8 bytes), numbers ``"<int>"``/``"<float>"``, ``"<bool>"``,
  ``"<null>"``, a list ``"<array:N>"``, a map keeps its keys and shapes its values down to
  depth 6, deeper maps become ``"<object:N>"``. It is cut to ``preview_bytes`` at a UTF-8
  character boundary. The preview shows the value as it was recorded (its key order,
  ``"<float>"`` for ``10.0``): equal values have equal hashes and sizes, not always equal
  previews.
- A value already in digest shape passes through unchanged, so digesting is idempotent.

Speed: the redaction of a run digests thousands of values, so the shape tables,
``type(x) is`` dispatch and the msgspec fast paths below are kept on a measurement:
``benchmarks/redaction.py`` times HttpTarget's decode and redaction at 0.6x of a plain
version of the same rules (plain/tuned 1.6-1.7x), with byte-identical results.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, Final

import msgspec

DEFAULT_PREVIEW_BYTES: Final = 120
_MAX_DEPTH: Final = 6
_DIGEST_KEYS: Final = frozenset(("hash", "bytes", "preview"))
_encode = msgspec.json.encode
_sha256 = hashlib.sha256


# msgspec and the standard library differ on floats only. Python writes a float below 1e-4
# or from 1e16 up in exponent form (``1e-05``, ``1e+16``); msgspec writes the small ones
# positionally (``0.00001``) and its exponents without ``+`` or padding (``1e16``); and it
# writes non-finite floats as ``null`` where Python writes ``NaN``/``Infinity``. The pattern
# finds either msgspec form after a JSON delimiter; inside a string it can match too, which
# only costs the slower path.
_DIFFERS: Final = re.compile(rb'(?:^|[\[:,"])-?(?:[0-9]+(?:\.[0-9]+)?e|0\.0000)')
# A cheap first test that every float ``_DIFFERS`` is about passes (an exponent is followed
# by a digit or a sign; a small float starts ``0.0000``); and the types whose JSON can hold
# no float at all.
_EXPONENT: Final = re.compile(rb"e[-+0-9]")
_FLOATLESS: Final = frozenset((str, int, bool, type(None)))


def _has_non_finite(value: Any) -> bool:
    kind = type(value)
    if kind is float:
        return not math.isfinite(value)
    if kind is dict:
        return any(_has_non_finite(key) or _has_non_finite(item) for key, item in value.items())
    if kind is list or kind is tuple:
        return any(_has_non_finite(item) for item in value)
    return False


def _standard(value: Any) -> bytes:
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), default=msgspec.to_builtins
    ).encode()


def compact_json(value: Any) -> bytes:
    """A value's compact JSON as written (digests hash :func:`canonical_json`).

    Exactly ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``: msgspec writes
    it (faster) unless the value holds a float that the two write differently (below 1e-4,
    from 1e16 up, non-finite) or keys msgspec refuses; then the standard library does.
    Values neither knows natively (Structs, datetimes) go through ``msgspec.to_builtins``.
    """
    try:
        data = _encode(value)
    except (TypeError, msgspec.EncodeError):
        return _standard(value)
    return exact_json(value, data)


def exact_json(value: Any, data: bytes) -> bytes:
    """:func:`compact_json` of ``value``, given ``data``, msgspec's encoding of it."""
    if type(value) in _FLOATLESS:
        return data
    if (b"0.0000" in data or _EXPONENT.search(data) is not None) and _DIFFERS.search(
        data
    ) is not None:
        return _standard(value)
    if b"null" in data and _has_non_finite(value):
        return _standard(value)
    return data


# A float in msgspec's output: digits after a JSON delimiter, then a point or an exponent.
# Inside a string it can match too, which only costs the slower, exact path.
_FLOAT_TOKEN: Final = re.compile(rb"(?:^|[\[:,])-?[0-9]+(?:\.|e)")


def _json_key(key: Any) -> str:
    """An object key as JSON writes it (``json.dumps`` rules)."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float):
        return json.dumps(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _canonical_tree(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {_json_key(key): _canonical_tree(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_canonical_tree(item) for item in value]
    plain = msgspec.to_builtins(value)  # Structs, datetimes, enums, subclasses
    return plain if type(plain) is kind else _canonical_tree(plain)


def canonical_json(value: Any) -> bytes:
    """The JSON bytes a digest hashes: equal JSON values give equal bytes.

    :func:`compact_json` with object keys sorted by code point and every number with an
    integral value written as an integer (``10.0`` and ``1e1`` as ``10``, ``-0.0`` as
    ``0``); other floats as Python writes them, integers exactly.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return compact_json(value)
    try:
        data = _encode(value, order="sorted")
    except (TypeError, msgspec.EncodeError):
        data = b""  # keys msgspec cannot sort, or a value it cannot write
    if (
        data
        and _FLOAT_TOKEN.search(data) is None
        and (data.find(b"null") < 0 or not _has_non_finite(value))
    ):
        return data
    return json.dumps(
        _canonical_tree(value),
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=True,
        default=msgspec.to_builtins,
    ).encode()


def _hash(data: bytes) -> str:
    return "sha256:" + _sha256(data).hexdigest()


def json_equal(left: Any, right: Any) -> bool:
    """Whether ``left`` and ``right`` are the same JSON value.

    Numbers compare by value (``10``, ``10.0`` and ``1e1`` are equal, so are ``-0.0`` and
    ``0``), maps whatever their key order, a tuple like a list, ``True`` is not ``1``:
    exactly when their digests' hashes are equal. Values JSON cannot hold compare with
    ``==``.
    """
    kind = type(left)
    if kind is type(right) and (kind is str or kind is int or kind is bool):
        return bool(left == right)
    try:
        return canonical_json(left) == canonical_json(right)
    except (TypeError, ValueError, msgspec.EncodeError):
        return bool(left == right)


def is_digest(value: Any) -> bool:
    """Whether ``value`` is already a digest (exactly ``hash``, ``bytes``, ``preview``)."""
    return (
        type(value) is dict
        and len(value) == 3
        and value.keys() == _DIGEST_KEYS
        and isinstance(value["hash"], str)
        and value["hash"].startswith("sha256:")
    )


_SCALAR_SHAPES: Final[dict[type[Any], str]] = {
    bool: "<bool>",
    int: "<int>",
    float: "<float>",
    type(None): "<null>",
}
# The shapes of strings up to this many UTF-8 bytes, made once: shaping is then a lookup.
_SHAPED_SIZES: Final = 512
_STRING_SHAPES: Final = tuple(f"<string:{size}>" for size in range(_SHAPED_SIZES))
# The same in quotes: a string's preview (ASCII, so its characters are its bytes).
_STRING_PREVIEWS: Final = tuple(f'"{shape}"' for shape in _STRING_SHAPES)


def _string_shape(value: str) -> str:
    size = len(value) if value.isascii() else len(value.encode())
    return _STRING_SHAPES[size] if size < _SHAPED_SIZES else f"<string:{size}>"


def _shape(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return _string_shape(value)
    scalar = _SCALAR_SHAPES.get(kind)
    if scalar is not None:
        return scalar
    if kind is list or kind is tuple:
        return f"<array:{len(value)}>"
    if kind is dict:
        if depth >= _MAX_DEPTH:
            return f"<object:{len(value)}>"
        return _map_shape(value, depth)
    return f"<{kind.__name__}>"


def _map_shape(value: dict[Any, Any], depth: int) -> dict[str, Any]:
    shapes: dict[str, Any] = {}
    scalars = _SCALAR_SHAPES
    strings = _STRING_SHAPES
    for key, item in value.items():
        name = key if type(key) is str else str(key)
        item_kind = type(item)
        if item_kind is str:
            size = len(item) if item.isascii() else len(item.encode())
            shapes[name] = strings[size] if size < _SHAPED_SIZES else f"<string:{size}>"
        else:
            shapes[name] = scalars.get(item_kind) or _shape(item, depth + 1)
    return shapes


def _flat_shape(value: dict[Any, Any]) -> dict[str, str] | None:
    """The shape of a map of strings, integers, booleans and nulls under string keys.

    ``None`` for any other map. The JSON of such a map holds no float, so msgspec writes it
    exactly as the standard library does.
    """
    shapes: dict[str, str] = {}
    strings = _STRING_SHAPES
    for key, item in value.items():
        if type(key) is not str:
            return None
        kind = type(item)
        if kind is str:
            size = len(item) if item.isascii() else len(item.encode())
            shapes[key] = strings[size] if size < _SHAPED_SIZES else f"<string:{size}>"
        elif kind is int or kind is bool or item is None:
            shapes[key] = _SCALAR_SHAPES[kind]
        else:
            return None
    return shapes


def _cut(data: bytes, limit: int) -> str:
    if len(data) <= limit:
        return data.decode()
    return data[:limit].decode(errors="ignore")


def _string_preview(value: str, preview_bytes: int) -> str:
    size = len(value) if value.isascii() else len(value.encode())
    preview = _STRING_PREVIEWS[size] if size < _SHAPED_SIZES else f'"<string:{size}>"'
    return preview if len(preview) <= preview_bytes else preview[:preview_bytes]


def digest_string(value: str, preview_bytes: int = DEFAULT_PREVIEW_BYTES) -> dict[str, Any]:
    """:func:`digest` of a string: its JSON holds no float, so msgspec's is canonical."""
    try:
        data = _encode(value)
    except (msgspec.EncodeError, UnicodeEncodeError):
        data = compact_json(value)  # its error, or its fallback
    return {
        "hash": "sha256:" + _sha256(data).hexdigest(),
        "bytes": len(data),
        "preview": _string_preview(value, preview_bytes),
    }


def _preview(value: Any, preview_bytes: int) -> str:
    kind = type(value)
    if kind is dict:
        # A shape holds strings only, so msgspec's bytes are the exact JSON.
        return _cut(_encode(_map_shape(value, 0)), preview_bytes)
    if kind is str:
        return _string_preview(value, preview_bytes)
    # The shape of anything else is ASCII: characters are bytes.
    preview = (
        f'"<array:{len(value)}>"' if kind is list or kind is tuple else f'"{_shape(value, 0)}"'
    )
    return preview if len(preview) <= preview_bytes else preview[:preview_bytes]


def digest_encoded(value: Any, data: bytes, preview_bytes: int = DEFAULT_PREVIEW_BYTES) -> Any:
    """The digest of ``value`` whose canonical JSON (:func:`canonical_json`) is ``data``.

    For callers that already hold the encoded bytes (a memo keyed by them, for example);
    ``value`` must not itself be a digest.
    """
    return {
        "hash": "sha256:" + _sha256(data).hexdigest(),
        "bytes": len(data),
        "preview": _preview(value, preview_bytes),
    }


def digest_msgspec(value: Any, data: bytes, preview_bytes: int = DEFAULT_PREVIEW_BYTES) -> Any:
    """:func:`digest_encoded` given ``data``, msgspec's encoding of ``value``.

    The caller has checked that ``value`` holds no non-finite float (``data`` has no
    ``null``, or :func:`_has_non_finite` said so).
    """
    kind = type(value)
    shapes = _flat_shape(value) if kind is dict else None  # the common case: no float
    if shapes is not None:
        canonical = data if len(value) < 2 else _encode(value, order="sorted")
    elif kind is int or kind is bool or kind is str:
        canonical = data
    else:
        canonical = canonical_json(value)
    if kind is dict:
        shape = _encode(_map_shape(value, 0) if shapes is None else shapes)
        preview = shape.decode() if len(shape) <= preview_bytes else _cut(shape, preview_bytes)
    else:
        preview = _preview(value, preview_bytes)
    return {"hash": _hash(canonical), "bytes": len(canonical), "preview": preview}


def digest(value: Any, preview_bytes: int = DEFAULT_PREVIEW_BYTES) -> Any:
    """Digest ``value``; a value that is already a digest is returned unchanged."""
    if is_digest(value):
        return value
    return digest_encoded(value, canonical_json(value), preview_bytes)


def _hashes(value: Any) -> tuple[str, ...]:
    """The hashes a digest of ``value`` may carry: of its canonical JSON, and of its
    compact JSON as written (a digest made before the canonical form, or by Instructor)."""
    canonical = canonical_json(value)
    try:
        written = compact_json(value)
    except (TypeError, ValueError):
        written = canonical
    if written == canonical:
        return (_hash(canonical),)
    return (_hash(canonical), _hash(written))


def matches_digest(value: Any, recorded: Any) -> bool:
    """Whether ``value`` is what ``recorded`` (a digest, or a plain value) holds.

    Either side may be a digest; two digests compare by hash; two plain values by
    :func:`json_equal`.
    """
    if is_digest(value) and not is_digest(recorded):
        value, recorded = recorded, value
    if is_digest(recorded):
        if is_digest(value):
            return bool(value["hash"] == recorded["hash"])
        return recorded["hash"] in _hashes(value)
    return json_equal(value, recorded)
