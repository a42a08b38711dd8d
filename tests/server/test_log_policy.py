"""Server logs follow the trace policy (issue 16 item 5, the server's side).

An agent's exception text reached the log verbatim, with its traceback, even under
``EvalAdapter(policy=TracePolicy.safe())``. Now the log always has the error id and the
type; the message and traceback only when the policy is verbatim (or no policy: the runs
themselves are then verbatim), or at DEBUG on ``evalport.agent.details`` when an operator
asks for it. A secret planted in the exception must not reach any other record.
"""

from __future__ import annotations

import logging
import traceback

import pytest
from evalport.protocol import TracePolicy
from evalport.protocol.runtime import SessionInfo
from serverkit import Build, open_session

SECRET = "sk-live-PLANTED-7f3a9c"


async def leaky(message: str, history: object, ctx: object) -> str:
    raise RuntimeError(f"upstream refused key {SECRET}")


def broken_factory(info: SessionInfo) -> object:
    raise LookupError(f"no tenant for key {SECRET}")


def text_of(record: logging.LogRecord) -> str:
    parts = [record.getMessage()]
    if record.exc_info:
        parts.append("".join(traceback.format_exception(*record.exc_info)))
    return "\n".join(parts)


def evalport_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("evalport")]


async def failed_turn(build: Build, **options: object) -> str:
    _, client = build(leaky, **options)
    session = await open_session(client)
    response = await client.post(f"/evals/sessions/{session}/turns", json={"message": "go"})
    assert response.status_code == 200
    [error] = response.json()["run"]["errorDetails"]
    return str(error["errorId"])


async def test_a_safe_policy_logs_the_error_id_and_type_only(
    build: Build, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="evalport")
    error_id = await failed_turn(build, policy=TracePolicy.safe())
    records = evalport_records(caplog)
    [logged] = [r for r in records if r.levelno >= logging.ERROR]
    assert error_id in logged.getMessage() and "RuntimeError" in logged.getMessage()
    assert logged.exc_info is None
    assert all(SECRET not in text_of(record) for record in records)


async def test_at_debug_on_request_the_details_follow(
    build: Build, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="evalport")
    caplog.set_level(logging.DEBUG, logger="evalport.agent.details")
    error_id = await failed_turn(build, policy=TracePolicy.safe())
    [details] = [r for r in evalport_records(caplog) if r.name == "evalport.agent.details"]
    assert details.levelno == logging.DEBUG
    assert error_id in details.getMessage() and SECRET in text_of(details)
    assert "Traceback" in text_of(details)


@pytest.mark.parametrize("policy", [TracePolicy.verbatim(), None], ids=["verbatim", "none"])
async def test_a_verbatim_policy_logs_message_and_traceback(
    build: Build, caplog: pytest.LogCaptureFixture, policy: TracePolicy | None
) -> None:
    caplog.set_level(logging.INFO, logger="evalport")
    error_id = await failed_turn(build, policy=policy)
    [logged] = [r for r in evalport_records(caplog) if r.levelno >= logging.ERROR]
    assert error_id in logged.getMessage() and SECRET in logged.getMessage()
    assert logged.exc_info is not None


async def test_an_internal_error_under_a_safe_policy_keeps_the_secret_out(
    build: Build, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="evalport")
    _, client = build(broken_factory, policy=TracePolicy.safe())
    response = await client.post("/evals/sessions", json={})
    assert response.status_code == 500
    assert SECRET not in response.text
    records = evalport_records(caplog)
    [logged] = [r for r in records if r.levelno >= logging.ERROR]
    assert "LookupError" in logged.getMessage() and logged.exc_info is None
    assert all(SECRET not in text_of(record) for record in records)
