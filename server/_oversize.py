"""Which content part a turn's body was in when it passed ``max_body_bytes``: the bytes up
to the limit scanned as JSON tokens (strings whole), at most :data:`MAX_TOKENS` of them.
"""

from __future__ import annotations

import json
import re
from typing import Final

MAX_TOKENS: Final = 4096
_TOKEN: Final = re.compile(rb'\s*(?:("[^"\\]*+(?:\\.[^"\\]*+)*+")|([{}\[\]:,])|([^\s{}\[\]:,"]++))')


class _Frame:
    __slots__ = ("index", "is_object", "key", "wants_key")

    def __init__(self, is_object: bool) -> None:
        self.is_object = is_object
        self.key: str | None = None
        self.wants_key = is_object
        self.index = 0


def _in_parts(stack: list[_Frame]) -> bool:
    """Whether ``stack`` ends at the body's ``parts`` array."""
    return len(stack) == 2 and stack[0].key == "parts" and not stack[1].is_object


def part_at_cut(prefix: bytes) -> tuple[int, str | None] | None:
    """The index and type of the part ``prefix`` ends in, or ``None`` outside the parts."""
    stack: list[_Frame] = []
    found: tuple[int, str | None] | None = None
    position = 0
    for _ in range(MAX_TOKENS):
        match = _TOKEN.match(prefix, position)
        if match is None or match.end() == position:
            break
        position = match.end()
        string, mark, _scalar = match.groups()
        top = stack[-1] if stack else None
        if string is not None:
            if top is not None and top.wants_key:
                top.key = json.loads(string)
            elif found is not None and len(stack) == 3 and top is not None and top.key == "type":
                kind = json.loads(string)
                found = (found[0], kind if isinstance(kind, str) else None)
            continue
        if mark in (b"{", b"["):
            if _in_parts(stack):
                found = (stack[-1].index, None)
            stack.append(_Frame(mark == b"{"))
        elif mark in (b"}", b"]"):
            if stack:
                stack.pop()
        elif mark == b":" and top is not None:
            top.wants_key = False
        elif mark == b"," and top is not None:
            top.index += 1
            top.wants_key = top.is_object
    else:
        return None
    if len(stack) >= 3 and stack[0].key == "parts":
        return found
    return None
