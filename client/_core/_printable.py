"""Agent text as a terminal, a log or a report shows it: read, never obeyed. Every
character that would act rather than show is written as its Python escape. Rules: see
ARCHITECTURE.md, "Agent text in messages and reports".
"""

from __future__ import annotations

import re

_ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """``text`` with every acting character written as its escape (see ARCHITECTURE.md,
    "Agent text in messages and reports")."""
    return _ACTING.sub(lambda found: ascii(found.group())[1:-1], text)
