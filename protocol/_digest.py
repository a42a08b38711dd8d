"""Digests: a value replaced by its hash, size and shape, byte for byte as Instructor's.

Hashes are over canonical JSON (equal JSON values are equal bytes); a digest passes
through unchanged. Rules: see ARCHITECTURE.md, "Trace policy and digests".
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
    """The hashes a digest of ``value`` may carry (ARCHITECTURE.md, "Trace policy and digests")."""
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
