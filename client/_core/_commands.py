"""What the subcommands share: exit codes and error output."""

from __future__ import annotations

import sys
from typing import Final

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1  # a failed (or errored) case, or a failed check
EXIT_USAGE: Final = 2  # a usage or configuration error: nothing was evaluated
EXIT_UNREACHABLE: Final = 3  # the target is unreachable
EXIT_INTERRUPTED: Final = 130  # Ctrl-C, after closing the sessions in flight


def fail(command: str, message: str, code: int = EXIT_USAGE) -> int:
    """Print ``evalport COMMAND: message`` to stderr and return ``code``."""
    print(f"evalport {command}: {message}", file=sys.stderr)
    return code
