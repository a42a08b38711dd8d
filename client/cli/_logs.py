"""What ``evalport run`` prints of a ``--local`` agent's failures: in full, whatever the
trace policy (only the user's own process logs here), each line printable. See
ARCHITECTURE.md, "evalport run".
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TextIO

from .._core import printable

AGENT_LOGGER = "evalport.agent"


class _Printable(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


@contextlib.contextmanager
def agent_logs(stream: TextIO, command: str = "run") -> Iterator[None]:
    """Send the agent's log records to ``stream`` until the block ends."""
    logger = logging.getLogger(AGENT_LOGGER)
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_Printable(f"evalport {command}: %(message)s"))
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
