"""Agent text as a terminal, a log or a report shows it: read, never obeyed.

Rule: every character that would act rather than show (the C0 controls but tab and
newline, so ESC, BEL and carriage return; DEL; the C1 controls; a lone surrogate; the
noncharacters U+FFFE and U+FFFF, which XML cannot hold) is written as its Python escape
(``\\x1b``, ``\\ud800``). A reply cannot clear the screen, write the clipboard, draw over
a line with a fake verdict, or make a JUnit file unreadable.
"""

from __future__ import annotations

import re

_ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """``text`` with every acting character written as its escape (see the module's rule)."""
    return _ACTING.sub(lambda found: ascii(found.group())[1:-1], text)
