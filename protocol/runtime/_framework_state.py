"""Framework state: what a framework adapter saves in a session's run for itself.

Rules:

- A framework adapter saves what its framework needs to continue the conversation (the
  whole message history, tool payloads) as events named :data:`FRAMEWORK_STATE`, so
  that the session continues wherever its run is restored.
- That state belongs to the agent's host, not to whoever evaluates the agent: the host
  keeps it with the session, and every run handed to an evaluator is the run
  :func:`without_framework_state`. The in-process target and the served agent apply the
  same rule, so both hand out the same runs.
"""

from __future__ import annotations

from typing import Final

import msgspec

from .._models import AgentRun

FRAMEWORK_STATE: Final = "framework.state"


def without_framework_state(run: AgentRun) -> AgentRun:
    """``run`` as an evaluator receives it: ``run`` itself when it holds no
    :data:`FRAMEWORK_STATE` event, else a copy without them (``run`` is left unchanged)."""
    events = run.events
    if not any(event.name == FRAMEWORK_STATE for event in events):
        return run
    kept = [event for event in events if event.name != FRAMEWORK_STATE]
    return msgspec.structs.replace(run, events=kept)
