"""Where every evalport command finds the bearer token: an environment variable only.

Never the command line (``ps`` shows it); a pasted token is refused without being echoed.
"""

from __future__ import annotations

import argparse
import re
from typing import Final

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

DEFAULT_TOKEN_ENV: Final = "EVALPORT_TOKEN"


def is_variable_name(value: str) -> bool:
    """Whether ``value`` can name an environment variable (letters, digits and ``_``)."""
    return _NAME.fullmatch(value) is not None


NOT_A_NAME: Final = (
    "takes the name of the environment variable that holds the token, not the token "
    "(what was given is not shown)"
)


def variable_name(value: str) -> str:
    """``--token-env``'s type: ``value`` when it can name a variable; else an argparse
    error that does not echo it (it may be the token itself)."""
    if not is_variable_name(value):
        raise argparse.ArgumentTypeError(NOT_A_NAME)
    return value
