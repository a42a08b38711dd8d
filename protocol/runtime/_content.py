"""A turn's content: the user's message and its content parts, as the agent receives them.

Rules: see ARCHITECTURE.md, "Recording a turn".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence

from msgspec import UNSET

from .._messages import ContentPart, FilePart, TextPart, TurnRequest
from .._models import UserPart


def turn_content(message: str, parts: Sequence[ContentPart]) -> tuple[str, tuple[ContentPart, ...]]:
    """The agent's message text and the turn's parts, in order."""
    if not parts:
        return message, (TextPart(text=message),)
    request = TurnRequest(message=message, parts=list(parts))
    return request.text(), tuple(request.content())


def user_parts(turn: int, content: Sequence[ContentPart]) -> list[UserPart]:
    """What the run records of a turn's parts."""
    records: list[UserPart] = []
    for part in content:
        if isinstance(part, TextPart):
            records.append(UserPart(turn=turn, type="text", text=part.text))
            continue
        kind = "file" if isinstance(part, FilePart) else "image"
        name = part.name if isinstance(part, FilePart) and part.name is not UNSET else None
        media_type = None if part.media_type is UNSET else part.media_type
        data = None if part.data is UNSET else part.data
        url = None if part.url is UNSET else part.url
        if data is None and url is not None and url.startswith("data:"):
            media_type, data = _data_url(url, media_type)
            if data is not None:
                url = None
        record = UserPart(turn=turn, type=kind, media_type=media_type, url=url, name=name)
        if data is not None:
            record.data = data
            record.sha256 = hashlib.sha256(data).hexdigest()
            record.size = len(data)
        records.append(record)
    return records


def _data_url(url: str, media_type: str | None) -> tuple[str | None, bytes | None]:
    """``data:[<type>][;base64],<payload>``: its media type and bytes (base64 only)."""
    head, _, payload = url[5:].partition(",")
    if not head.endswith(";base64"):
        return media_type, None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return media_type, None
    return head.removesuffix(";base64") or media_type, data
