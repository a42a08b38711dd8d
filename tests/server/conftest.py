"""Fixtures of the server tests: adapters driven in-process through ``httpx.ASGITransport``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from evalport.server import EvalAdapter
from serverkit import AUTH, TOKEN, Build, echo_agent


@pytest.fixture
async def build() -> AsyncIterator[Build]:
    """``build(agent=echo_agent, headers=AUTH, **adapter_options) -> (adapter, client)``."""
    made: list[tuple[EvalAdapter, httpx.AsyncClient]] = []

    def make(
        agent: Any = echo_agent,
        *,
        headers: dict[str, str] | None = None,
        prefix: str = "",
        **options: Any,
    ) -> tuple[EvalAdapter, httpx.AsyncClient]:
        options.setdefault("token", TOKEN)
        adapter = EvalAdapter(agent, **options)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=adapter.app(prefix)),
            base_url="http://adapter.test",
            headers=AUTH if headers is None else headers,
        )
        made.append((adapter, client))
        return adapter, client

    yield make
    for adapter, client in made:
        await client.aclose()
        await adapter.aclose()


@pytest.fixture
async def client(build: Build) -> httpx.AsyncClient:
    return build()[1]
