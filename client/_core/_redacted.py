"""A digest as every report, transcript, judge prompt and message shows it.

Rule: a digest is shown by :func:`digest_text` and nowhere else, never as if it were the
value. See ARCHITECTURE.md, "Digests as users see them".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def digest_text(digest: Mapping[str, Any]) -> str:
    """``<redacted <string:5> #156f3d9c>``: the value's shape (a string's without its
    JSON quotes) and the first 8 hex digits of its hash."""
    shape = str(digest.get("preview", ""))
    if len(shape) > 1 and shape.startswith('"') and shape.endswith('"'):
        shape = shape[1:-1]
    short = str(digest.get("hash", "")).removeprefix("sha256:")[:8]
    return f"<redacted {shape} #{short}>"
