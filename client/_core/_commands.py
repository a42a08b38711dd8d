"""What the subcommands share: exit codes and error output.

Exit codes: ``0`` success; ``1`` a failed (or errored) case, or a failed check; ``2`` a
usage or configuration error (nothing was evaluated); ``3`` the target is unreachable;
``130`` interrupted (Ctrl-C), after closing the sessions in flight.
"""

from __future__ import annotations

import sys
from typing import Final

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_UNREACHABLE: Final = 3
EXIT_INTERRUPTED: Final = 130


def fail(command: str, message: str, code: int = EXIT_USAGE) -> int:
    """Print ``evalport COMMAND: message`` to stderr and return ``code``."""
    print(f"evalport {command}: {message}", file=sys.stderr)
    return code
