"""Framework state: what a framework adapter saves in a run for itself, hidden from evaluators.

Rules: see ARCHITECTURE.md, "Recording a turn".
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
