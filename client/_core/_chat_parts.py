"""Content parts of logged user messages, read as the ``ContentPart`` objects a live turn
with parts carries. Rules: see ARCHITECTURE.md, "Logged conversations".
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Callable, Mapping
from typing import Any, Final

from evalport.protocol import ContentPart, FilePart, ImagePart, TextPart

_AUDIO_TYPES: Final = {"mp3": "audio/mpeg"}
_OCTETS: Final = "application/octet-stream"


def part_of(fmt: str, part: Any) -> ContentPart | None:
    """The protocol part one logged content part of ``fmt`` is, ``None`` for a part that is
    skipped (ARCHITECTURE.md, "Logged conversations"); ``ValueError`` if malformed."""
    if isinstance(part, str):
        return TextPart(text=part)
    if not isinstance(part, Mapping):
        raise ValueError(f"a content part is {type(part).__name__}, not an object")
    kind = part.get("type")
    reader = _READERS[fmt].get(kind)
    if reader is None:
        if fmt == "anthropic":
            return None
        known = ", ".join(sorted(name for name in _READERS[fmt] if name))
        raise ValueError(f"a user content part of type {kind!r} is not understood (known: {known})")
    try:
        return reader(part)
    except ValueError as error:
        raise ValueError(f"the {kind} part: {error}") from None


def _text(part: Mapping[str, Any]) -> ContentPart:
    text = part.get("text")
    if not isinstance(text, str):
        raise ValueError("text must be a string")
    return TextPart(text=text)


def _string(data: Any, key: str) -> str:
    value = data.get(key) if isinstance(data, Mapping) else None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string")
    return value


def _optional(data: Mapping[str, Any], key: str) -> str | None:
    return None if data.get(key) is None else _string(data, key)


def _decoded(payload: str) -> bytes:
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("its base64 data does not decode") from None


def _inline(
    kind: type[ImagePart] | type[FilePart],
    text: str,
    media_type: str | None = None,
    name: str | None = None,
) -> ContentPart:
    """A part from a URL or a payload: a ``data:`` URL in base64 or a bare base64 payload
    becomes bytes; an ``http(s)``/other URL stays a URL."""
    data: bytes | None = None
    url: str | None = None
    if text.startswith("data:"):
        head, comma, payload = text[5:].partition(",")
        if not comma:
            raise ValueError("its data URL has no comma")
        if head.endswith(";base64"):
            data = _decoded(payload)
            media_type = head.removesuffix(";base64") or media_type
        else:
            url = text  # a data URL in plain text: its text is its content
    elif "://" in text:
        url = text
    else:
        data = _decoded(text)
    if data is not None and not media_type:
        guessed = mimetypes.guess_type(name)[0] if name else None
        media_type = guessed or _OCTETS
    return _build(kind, data=data, url=url, media_type=media_type, name=name)


def _build(
    kind: type[ImagePart] | type[FilePart],
    *,
    data: bytes | None = None,
    url: str | None = None,
    media_type: str | None = None,
    name: str | None = None,
) -> ContentPart:
    """The part with the fields given; an empty media type or name is no field."""
    fields: dict[str, Any] = {"data": data, "url": url, "media_type": media_type or None}
    if kind is FilePart:
        fields["name"] = name or None
    return kind(**{key: value for key, value in fields.items() if value is not None})


def _input_audio(part: Mapping[str, Any]) -> ContentPart:
    audio = part.get("input_audio")
    fmt = _string(audio, "format")
    media_type = _AUDIO_TYPES.get(fmt, f"audio/{fmt}")
    return _build(FilePart, data=_decoded(_string(audio, "data")), media_type=media_type)


def _inline_or_id(
    kind: type[ImagePart] | type[FilePart],
    data: Mapping[str, Any],
    keys: tuple[str, ...],
    name: str | None = None,
    holder: str = "it",
) -> ContentPart:
    """A part from the first of ``keys`` in ``data`` (a URL or a payload, :func:`_inline`),
    else from its ``file_id``, kept as the part's URL."""
    for key in keys:
        value = _optional(data, key)
        if value is not None:
            return _inline(kind, value, name=name)
    file_id = _optional(data, "file_id")
    if file_id is None:
        raise ValueError(f"{holder} needs {', '.join(keys)} or file_id")
    return _build(kind, url=file_id, name=name)


# -- OpenAI Chat Completions ------------------------------------------------------------


def _chat_image(part: Mapping[str, Any]) -> ContentPart:
    image = part.get("image_url")
    url = image if isinstance(image, str) else _string(image, "url")
    return _inline(ImagePart, url)


def _chat_file(part: Mapping[str, Any]) -> ContentPart:
    file = part.get("file")
    if not isinstance(file, Mapping):
        raise ValueError("file must be an object")
    return _inline_or_id(FilePart, file, ("file_data",), _optional(file, "filename"), "file")


# -- OpenAI Responses -------------------------------------------------------------------


def _responses_image(part: Mapping[str, Any]) -> ContentPart:
    return _inline_or_id(ImagePart, part, ("image_url",))


def _responses_file(part: Mapping[str, Any]) -> ContentPart:
    name = _optional(part, "filename")
    return _inline_or_id(FilePart, part, ("file_data", "file_url"), name)


# -- Anthropic Messages -----------------------------------------------------------------


def _anthropic_source(
    kind: type[ImagePart] | type[FilePart], part: Mapping[str, Any]
) -> ContentPart:
    source = part.get("source")
    if not isinstance(source, Mapping):
        raise ValueError("source must be an object")
    name = _optional(part, "title")
    origin = source.get("type")
    if origin == "base64":
        data = _decoded(_string(source, "data"))
        return _build(kind, data=data, media_type=_string(source, "media_type"), name=name)
    if origin == "url":
        return _build(kind, url=_string(source, "url"), name=name)
    if origin == "file":
        return _build(kind, url=_string(source, "file_id"), name=name)
    if kind is FilePart and origin == "text":
        text = source.get("data")
        if not isinstance(text, str):
            raise ValueError("a text source's data must be a string")
        media_type = _optional(source, "media_type") or "text/plain"
        return _build(kind, data=text.encode(), media_type=media_type, name=name)
    if kind is FilePart and origin == "content":
        blocks = source.get("content")
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if not isinstance(blocks, list):
            raise ValueError("a content source's content must be a string or a list")
        texts = [_string(block, "text") for block in blocks]
        return _build(kind, data="\n".join(texts).encode(), media_type="text/plain", name=name)
    raise ValueError(f"source of type {origin!r} is not understood")


def _search_result(part: Mapping[str, Any]) -> ContentPart | None:
    content = part.get("content")
    blocks = [{"text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return None
    texts = [
        block["text"]
        for block in blocks
        if isinstance(block, Mapping) and isinstance(block.get("text"), str) and block["text"]
    ]
    return TextPart(text="\n".join(texts)) if texts else None


_Reader = Callable[[Mapping[str, Any]], ContentPart | None]

_READERS: Final[dict[str, dict[str | None, _Reader]]] = {
    "openai-chat": {
        None: _text,
        "text": _text,
        "image_url": _chat_image,
        "input_audio": _input_audio,
        "file": _chat_file,
    },
    "openai-responses": {
        None: _text,
        "input_text": _text,
        "text": _text,
        "input_image": _responses_image,
        "input_audio": _input_audio,
        "input_file": _responses_file,
    },
    "anthropic": {
        None: _text,
        "text": _text,
        "image": lambda part: _anthropic_source(ImagePart, part),
        "document": lambda part: _anthropic_source(FilePart, part),
        "search_result": _search_result,
    },
}

FORMAT_OF_PART: Final = {
    "image_url": "openai-chat",
    "file": "openai-chat",
    "input_text": "openai-responses",
    "output_text": "openai-responses",
    "input_image": "openai-responses",
    "input_file": "openai-responses",
    "tool_use": "anthropic",
    "tool_result": "anthropic",
    "image": "anthropic",
    "document": "anthropic",
    "search_result": "anthropic",
    "thinking": "anthropic",
    "redacted_thinking": "anthropic",
    "container_upload": "anthropic",
}
"""The format a content part's type tells (``input_audio`` is in two, so tells none)."""
