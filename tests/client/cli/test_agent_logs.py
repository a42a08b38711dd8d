"""What `evalport run` prints of an agent's log records is shown, never obeyed."""

from __future__ import annotations

import io
import logging

from evalport.client.cli._logs import AGENT_LOGGER, agent_logs


def test_an_agent_error_cannot_drive_the_terminal() -> None:
    stream = io.StringIO()
    with agent_logs(stream):
        try:
            raise type("Bad\x1b[2JError", (Exception,), {})("\x1b[2J\rPASS")
        except Exception:
            logging.getLogger(AGENT_LOGGER).exception("agent error e1 \x1b]52;c;aGk=\x07")
    printed = stream.getvalue()
    assert "\x1b" not in printed and "\x07" not in printed and "\r" not in printed
    assert "Bad\\x1b[2JError" in printed
