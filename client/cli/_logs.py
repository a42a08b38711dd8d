"""What ``evalport run`` prints of the agent's failures (``--local``).

Rule: the turn runtime logs each exception an agent raises (logger ``evalport.agent``,
level ERROR) with its error id, type, message and traceback. While ``evalport run`` runs,
those records go to stderr **in full**, whatever the trace policy: only an in-process
agent (``--local``, the user's own process) logs here, and its author is the one
reading. The trace policy still governs what the run, its reports and the cache keep.
Records that carry no exception are printed as they are, from WARNING up.

A line is printed :func:`~evalport.client._core.printable`: an exception's message cannot
move the cursor or clear the screen.
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
