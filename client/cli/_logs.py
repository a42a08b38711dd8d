"""What ``evalport run`` prints of the agent's failures (``--local``), by the trace policy.

Rule: the turn runtime logs each exception an agent raises (logger ``evalport.agent``,
level ERROR) with its error id, type, message and traceback. While ``evalport run`` runs,
those records go to stderr, which is the CI log, and follow the run's trace policy: the
error id and the type always; the message and the traceback only under a verbatim policy
(``--trace-policy verbatim``). Records that carry no exception are printed as they are,
from WARNING up.

Whatever the policy, a line is printed :func:`~evalport.client._core.printable`: an
exception's message cannot move the cursor or clear the screen.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TextIO

from evalport.protocol import TracePolicy

from .._core import printable

AGENT_LOGGER = "evalport.agent"


class _PolicyFormatter(logging.Formatter):
    def __init__(self, command: str, verbatim: bool) -> None:
        super().__init__(f"evalport {command}: %(message)s")
        self.command = command
        self.verbatim = verbatim

    def format(self, record: logging.LogRecord) -> str:
        if self.verbatim or record.exc_info is None:
            return printable(super().format(record))
        kind = record.exc_info[0]
        error_type = getattr(record, "error_type", None) or (
            kind.__name__ if kind is not None else "an exception"
        )
        error_id = getattr(record, "error_id", None)
        named = f"agent error {error_id}" if error_id else "agent error"
        return printable(
            f"evalport {self.command}: {named}: {error_type} (its message and traceback are "
            "withheld by the safe trace policy; --trace-policy verbatim prints them)"
        )


@contextlib.contextmanager
def agent_logs(policy: TracePolicy, stream: TextIO, command: str = "run") -> Iterator[None]:
    """Send the agent's log records to ``stream`` by ``policy`` until the block ends."""
    logger = logging.getLogger(AGENT_LOGGER)
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_PolicyFormatter(command, policy.verbatim_payloads))
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
