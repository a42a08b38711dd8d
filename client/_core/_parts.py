"""Content parts from what a case passes to ``ctx.send``: images and files in a turn.
Rules: see ARCHITECTURE.md, "Cases, datasets and selection".
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from evalport.protocol import ContentPart, FilePart, ImagePart, TextPart

_URL_SCHEMES: Final = ("http://", "https://", "data:")
_MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"%PDF-", "application/pdf"),
)
_OCTETS: Final = "application/octet-stream"


def media_type_of(data: bytes) -> str:
    """The media type ``data`` starts like (see ARCHITECTURE.md, "Cases, datasets and
    selection")."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return _OCTETS


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def _part(kind: str, source: Any, base: Path | None) -> ContentPart:
    made = ImagePart if kind == "image" else FilePart
    if isinstance(source, ImagePart | FilePart):
        return source
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        return made(data=data, media_type=media_type_of(data))
    if isinstance(source, str) and source.startswith(_URL_SCHEMES):
        return made(url=source)
    if not isinstance(source, str | os.PathLike):
        raise TypeError(
            f"ctx.send({kind}=...) takes a path, bytes, a URL or an {made.__name__}, "
            f"not {type(source).__name__}"
        )
    given = Path(source)
    path = given if given.is_absolute() or base is None else base / given
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        where = f" (resolved against {base})" if path != given else ""
        raise FileNotFoundError(
            f"ctx.send({kind}={os.fspath(source)!r}): no such file {path}{where}"
        ) from None
    media_type = mimetypes.guess_type(path.name)[0] or media_type_of(data)
    if made is FilePart:
        return FilePart(data=data, media_type=media_type, name=path.name)
    return ImagePart(data=data, media_type=media_type)


def turn_parts(
    message: str | Sequence[Any], image: Any, file: Any, base: Path | None
) -> tuple[str, list[ContentPart]]:
    """The turn's ``message`` and its parts (see ARCHITECTURE.md, "Cases, datasets and
    selection")."""
    parts: list[ContentPart] = []
    if isinstance(message, str):
        text = message
    else:
        text = ""
        for item in message:
            if isinstance(item, str):
                parts.append(TextPart(text=item))
            elif isinstance(item, TextPart | ImagePart | FilePart):
                parts.append(item)
            else:
                raise TypeError(
                    "ctx.send([...]) takes str, TextPart, ImagePart and FilePart items, "
                    f"not {type(item).__name__}"
                )
    parts += [_part("image", source, base) for source in _listed(image)]
    parts += [_part("file", source, base) for source in _listed(file)]
    if parts and all(isinstance(part, TextPart) for part in parts):
        return "\n".join(part.text for part in parts if isinstance(part, TextPart)), []
    return text, parts
