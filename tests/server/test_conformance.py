"""Schemathesis against ``openapi.yaml`` and the adapter running under real uvicorn.

Every operation gets generated requests, valid and invalid, with the bearer token; half of
the session-scoped requests target a real, freshly opened session so that turns, attach,
delete and approvals run for real rather than answering 404. Every response must be
allowed by the spec (status, content type, headers, body schema) and none may be a 5xx.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from evalport.server import EvalAdapter, Limits
from hypothesis import HealthCheck, settings
from serverkit import AUTH, TOKEN
from support.servers import running_server

ROOT = Path(__file__).parents[2]
schema = schemathesis.openapi.from_path(ROOT / "openapi.yaml")
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from support_agent import agent
    finally:
        sys.path.remove(str(ROOT / "examples"))
    # faults=True: every body the spec calls valid must be accepted, tool faults included
    limits = Limits(max_sessions=10_000, turn_timeout=5)
    adapter = EvalAdapter(agent, token=TOKEN, limits=limits, faults=True)
    with running_server(adapter.app()) as url:
        yield url


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


def fresh_session(http: requests.Session, base_url: str) -> str:
    response = http.post(f"{base_url}/evals/sessions", json={}, headers=AUTH, timeout=10)
    response.raise_for_status()
    return str(response.json()["sessionId"])


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_the_running_server_conforms_to_openapi(
    case: Any, base_url: str, http: requests.Session
) -> None:
    if "sessionId" in (case.path_parameters or {}) and zlib.crc32(repr(case.body).encode()) % 2:
        case.path_parameters["sessionId"] = fresh_session(http, base_url)
    response = case.call(base_url=base_url, session=http, headers=AUTH, timeout=10)
    assert response.status_code < 500, response.text
    case.validate_response(response)
