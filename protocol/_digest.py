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
- Matching (:func:`matches_digest`) compares hashes; a plain value also matches the
  hashes of the other ways an implementation writes the same value, in nested values
  too: keys as written or sorted, and numbers of integral value as integers (PHP's
  ``json_encode`` writes ``0.0`` as ``0``) or with ``.0`` (``42`` as ``42.0``). So a
  digest made before the canonical form, by Instructor, or by a server written elsewhere
  still matches the value it was made from. Two plain values match when
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
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import msgspec

DEFAULT_PREVIEW_BYTES: Final = 120
_MAX_DEPTH: Final = 6
_DIGEST_KEYS: Final = frozenset(("hash", "bytes", "preview"))
_SCALAR_SHAPES: Final[dict[type[Any], str]] = {
    bool: "<bool>",
    int: "<int>",
    float: "<float>",
    type(None): "<null>",
}


def _dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    return json.dumps(
        value,
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=sort_keys,
        default=msgspec.to_builtins,
    ).encode()


def compact_json(value: Any) -> bytes:
    """A value's compact JSON as written (digests hash :func:`canonical_json`).

    Exactly ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``; values the
    standard library does not know (Structs, datetimes) go through ``msgspec.to_builtins``.
    """
    return _dumps(value)


def _integral(value: Any) -> Any:
    """Parsed JSON with every float of integral value as an integer."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is list:
        return [_integral(item) for item in value]
    if kind is dict:
        return {key: _integral(item) for key, item in value.items()}
    return value


def canonical_json(value: Any) -> bytes:
    """The JSON bytes a digest hashes: equal JSON values give equal bytes.

    :func:`compact_json` with object keys sorted by code point and every number with an
    integral value written as an integer (``10.0`` and ``1e1`` as ``10``, ``-0.0`` as
    ``0``); other floats as Python writes them, integers exactly.
    """
    return _dumps(_integral(json.loads(compact_json(value))), sort_keys=True)


def _hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def json_equal(left: Any, right: Any) -> bool:
    """Whether ``left`` and ``right`` are the same JSON value.

    Numbers compare by value (``10``, ``10.0`` and ``1e1`` are equal, so are ``-0.0`` and
    ``0``), maps whatever their key order, a tuple like a list, ``True`` is not ``1``:
    exactly when their digests' hashes are equal. Values JSON cannot hold compare with
    ``==``.
    """
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


def _shape(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return f"<string:{len(value.encode())}>"
    if kind in _SCALAR_SHAPES:
        return _SCALAR_SHAPES[kind]
    if kind is list or kind is tuple:
        return f"<array:{len(value)}>"
    if kind is dict:
        if depth >= _MAX_DEPTH:
            return f"<object:{len(value)}>"
        return {
            key if type(key) is str else str(key): _shape(item, depth + 1)
            for key, item in value.items()
        }
    return f"<{kind.__name__}>"


def digest(value: Any, preview_bytes: int = DEFAULT_PREVIEW_BYTES) -> Any:
    """Digest ``value``; a value that is already a digest is returned unchanged."""
    if is_digest(value):
        return value
    data = canonical_json(value)
    preview = msgspec.json.encode(_shape(value, 0))  # a shape holds strings only
    return {
        "hash": _hash(data),
        "bytes": len(data),
        "preview": preview[:preview_bytes].decode(errors="ignore"),
    }


def _with_fractions(value: Any) -> Any:
    """Parsed JSON with every number of integral value as a float (written ``42.0``)."""
    kind = type(value)
    if kind is int and abs(value) < 2**53:
        return float(value)
    if kind is list:
        return [_with_fractions(item) for item in value]
    if kind is dict:
        return {key: _with_fractions(item) for key, item in value.items()}
    return value


def _hashes(value: Any) -> set[str]:
    """The hashes a digest of ``value`` may carry (see the module's rules on matching)."""
    try:
        parsed = json.loads(compact_json(value))
    except (TypeError, ValueError):
        return {_hash(canonical_json(value))}
    numbers = (parsed, _integral(parsed), _with_fractions(parsed))
    return {_hash(_dumps(form, sort_keys=order)) for form in numbers for order in (False, True)}


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
