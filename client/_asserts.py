"""A plain ``assert`` in a case: a failed gate named ``assert``, not an error, when the
statement is the eval's own code. See ARCHITECTURE.md, "The eval context".
"""

from __future__ import annotations

import ast
import linecache
import traceback
from types import FrameType
from typing import Any

from ._context import is_eval_code, shown_path
from ._core import AssertionResult

_PLAIN = (
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Constant,
    ast.Load,
    ast.Tuple,
    ast.List,
    ast.Slice,
    ast.UnaryOp,
    ast.USub,
)


def failed_assert(error: AssertionError) -> AssertionResult | None:
    """The failed gate of an ``assert`` statement of eval code, or ``None`` when ``error``
    was raised elsewhere (see ARCHITECTURE.md, "The eval context")."""
    frames = list(traceback.walk_tb(error.__traceback__))
    if not frames or not is_eval_code(frames[-1][0].f_code.co_filename):
        return None
    frame, line = frames[-1]
    filename = frame.f_code.co_filename
    source = linecache.getline(filename, line).strip()
    said = str(error)
    if said:
        message = f"{source}: {said}" if source.startswith("assert") else said
    else:
        message = _compared(source, frame) or source or "assert failed"
    return AssertionResult(
        name="assert",
        score=0.0,
        passed=False,
        message=message,
        location=f"{shown_path(filename)}:{line}",
    )


def _compared(source: str, frame: FrameType) -> str | None:
    """``source: left is L, right is R`` for a one-line ``assert left OP right``."""
    try:
        statement = ast.parse(source).body[0]
    except (SyntaxError, IndexError):
        return None
    if not isinstance(statement, ast.Assert) or not isinstance(statement.test, ast.Compare):
        return None
    test = statement.test
    if len(test.ops) != 1:
        return None
    sides = [test.left, test.comparators[0]]
    if not all(isinstance(node, _PLAIN) for side in sides for node in ast.walk(side)):
        return None
    shown: list[str] = []
    for side in sides:
        try:
            # names, attributes, subscripts and constants only (checked above)
            value: Any = eval(
                compile(ast.Expression(side), "<assert>", "eval"), frame.f_globals, frame.f_locals
            )
        except Exception:
            return None
        shown.append(f"{ast.unparse(side)} is {value!r}")
    return f"{source}: {', '.join(shown)}"
