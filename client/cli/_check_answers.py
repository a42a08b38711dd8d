"""What a conforming answer is, for ``evalport check`` (:mod:`._check` lists the checks):
an accumulated run with valid status, UUID ids and known stop reasons, and an RFC 9457
problem with its content type, ``type``, ``title`` and a ``status`` equal to the HTTP
status, without a stack trace. :class:`CheckFailed` carries a failed check's line."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from evalport.protocol import PROBLEM_CONTENT_TYPE, AgentRun, RunStatus, StopReason


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
        if step.stop_signal and step.stop_signal.reason not in StopReason.ALL:
            raise CheckFailed(f"steps[{index}].stopSignal.reason {step.stop_signal.reason!r}")
    for index, record in enumerate(run.tools):
        uuid_or_empty(record.id, f"tools[{index}].id")
    if run.stop_signal and run.stop_signal.reason not in StopReason.ALL:
        raise CheckFailed(f"stopSignal.reason {run.stop_signal.reason!r} is not a known reason")


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
