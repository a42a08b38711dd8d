"""JSON paths of decoding errors, down to the field and the map key at fault.

msgspec writes every map key as ``[...]``; :func:`error_path` finds the key by checking
which entry's value fails its type: ``$.decisions["call_2"].decision``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec
from msgspec import inspect as mi

_FIELD_ERRORS: Final = ("Object missing required field `", "Object contains unknown field `")
_SEGMENT: Final = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[(\.\.\.)\]")


def _split(error: msgspec.ValidationError) -> tuple[str, str]:
    text = str(error)
    path = "$"
    marker = " - at `"
    if marker in text:
        text, path = text.rsplit(marker, 1)
        path = path.rstrip("`")
    for prefix in _FIELD_ERRORS:
        if text.startswith(prefix):
            return text, f"{path}.{text[len(prefix) :].rstrip('`')}"
    return text, path


def _container(info: mi.Type, node: Any) -> mi.Type | None:
    """The branch of ``info`` (maybe a union) that describes the JSON ``node``."""
    options = info.types if isinstance(info, mi.UnionType) else (info,)
    for option in options:
        if isinstance(node, dict) and isinstance(option, mi.StructType | mi.DictType):
            return option
        if isinstance(node, list) and isinstance(option, mi.ListType):
            return option
    return None


_SCALARS: Final = {mi.StrType: str, mi.IntType: int, mi.FloatType: float, mi.BoolType: bool}


def _python_type(info: mi.Type) -> Any:
    """A type to check a map value against, for the values requests hold."""
    if isinstance(info, mi.StructType):
        return info.cls
    return _SCALARS.get(type(info))


def _resolve(path: str, data: bytes, kind: type[Any]) -> str:
    try:
        node: Any = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return path
    info: mi.Type | None = mi.type_info(kind)
    resolved = "$"
    for match in _SEGMENT.finditer(path[1:]):
        name, index, _ = match.groups()
        shape = _container(info, node) if info is not None else None
        if name is not None:
            resolved += f".{name}"
            if isinstance(shape, mi.StructType) and isinstance(node, dict):
                fields = {field.encode_name: field.type for field in shape.fields}
                info, node = fields.get(name), node.get(name)
            else:
                info, node = None, None
        elif index is not None:
            resolved += f"[{index}]"
            if isinstance(shape, mi.ListType) and isinstance(node, list) and int(index) < len(node):
                info, node = shape.item_type, node[int(index)]
            else:
                info, node = None, None
        else:
            value_type = _python_type(shape.value_type) if isinstance(shape, mi.DictType) else None
            key = _failing_key(node, value_type) if isinstance(node, dict) else None
            if key is None or not isinstance(shape, mi.DictType):
                resolved += "[...]"
                info, node = None, None
            else:
                resolved += f"[{json.dumps(key, ensure_ascii=False)}]"
                info, node = shape.value_type, node[key]
    return resolved


def _failing_key(node: dict[str, Any], value_type: Any) -> str | None:
    if value_type is None:
        return None
    for key, value in node.items():
        try:
            msgspec.convert(value, value_type)
        except msgspec.ValidationError:
            return str(key)
    return None


def error_path(error: msgspec.ValidationError, data: bytes, kind: type[Any]) -> tuple[str, str]:
    """The error text without its location, and the JSON path it is about."""
    text, path = _split(error)
    if "[...]" in path:
        path = _resolve(path, data, kind)
    return text, path
