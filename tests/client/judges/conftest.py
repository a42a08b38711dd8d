"""Fixtures for judge tests: the fake chat server (one per session) and a judge host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from judge_fake_server import FakeChatServer
from judge_host import Host
from support.servers import running_server


@pytest.fixture(scope="session")
def _chat_server() -> Iterator[FakeChatServer]:
    server = FakeChatServer()
    with running_server(server.app) as url:
        server.base_url = f"{url}/v1"
        yield server


@pytest.fixture
def chat_server(_chat_server: FakeChatServer) -> FakeChatServer:
    _chat_server.reset()
    return _chat_server


@pytest.fixture
def host() -> Host:
    return Host()
