"""What a conforming answer is, for ``evalport check``: an accumulated run in the
``{"run": ...}`` envelope the spec requires, and an RFC 9457 problem; :class:`CheckFailed`
carries a failed check's line. See ARCHITECTURE.md, "evalport check".
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from evalport.protocol import (
    PROBLEM_CONTENT_TYPE,
    AgentRun,
    RunStatus,
    StopReason,
    decode_run,
)


class CheckFailed(Exception):
    """A check failed; its message is the check's line."""


def uuid_or_empty(value: str, where: str) -> None:
    if value:
        try:
            uuid.UUID(value)
        except ValueError:
            raise CheckFailed(f"{where} is {value!r}, not a UUID") from None


def validate_run(run: AgentRun, turns: int) -> None:
    if run.turns != turns:
        raise CheckFailed(f"run.turns is {run.turns}, expected {turns} (runs are accumulated)")
    if run.status not in RunStatus.ALL:
        raise CheckFailed(f"run.status {run.status!r} is not one of {', '.join(RunStatus.ALL)}")
    for index, step in enumerate(run.steps):
        uuid_or_empty(step.id, f"steps[{index}].id")
        for position, execution in enumerate(step.tool_executions):
            uuid_or_empty(execution.id, f"steps[{index}].toolExecutions[{position}].id")
        if step.stop_signal:
            _known_reason(step.stop_signal.reason, f"steps[{index}].stopSignal.reason")
    for index, record in enumerate(run.tools):
        uuid_or_empty(record.id, f"tools[{index}].id")
    if run.stop_signal:
        _known_reason(run.stop_signal.reason, "stopSignal.reason")


def _known_reason(reason: str, where: str) -> None:
    # Clients keep an unknown reason as text, but Instructor rejects it: servers send
    # only these.
    if reason not in StopReason.ALL:
        raise CheckFailed(f"{where} {reason!r} is not one of {', '.join(StopReason.ALL)}")


def enveloped_run(response: httpx.Response) -> AgentRun:
    """The run of a turn's, an attach's or an approvals call's 200, which the spec
    requires as ``{"run": AgentRun}``."""
    try:
        body = response.json()
    except ValueError:
        raise CheckFailed(f"the body is not JSON: {response.text[:200]}") from None
    if not isinstance(body, dict) or not isinstance(body.get("run"), dict):
        keys = ", ".join(repr(key) for key in body) if isinstance(body, dict) else "no object"
        raise CheckFailed(
            'the run must come in its envelope {"run": ...}, as the spec requires; '
            f"the body holds {keys}"[:300]
        )
    return decode_run(response.content)


def expect(response: httpx.Response, status: int, doing: str = "") -> httpx.Response:
    """``response`` when its status is ``status``; else its check fails, showing its body."""
    if response.status_code != status:
        raise CheckFailed(
            f"{doing}HTTP {response.status_code}, expected {status}: {response.text[:200]}"
        )
    return response


def problem(response: httpx.Response, status: int, kind: str | None = None) -> dict[str, Any]:
    expect(response, status)
    content_type = response.headers.get("content-type", "")
    if not content_type.startswith(PROBLEM_CONTENT_TYPE):
        raise CheckFailed(f"content-type {content_type!r}, expected {PROBLEM_CONTENT_TYPE}")
    if "Traceback" in response.text:
        raise CheckFailed("the problem body contains a stack trace")
    try:
        body = response.json()
    except ValueError:
        raise CheckFailed("the problem body is not JSON") from None
    if not isinstance(body, dict) or not {"type", "title", "status"} <= body.keys():
        raise CheckFailed(f"a problem needs type, title and status: {response.text[:200]}")
    if body["status"] != status:
        raise CheckFailed(f"problem status {body['status']} differs from HTTP {status}")
    if kind is not None and body["type"] != kind:
        raise CheckFailed(f"problem type {body['type']!r}, expected {kind!r}")
    return body
