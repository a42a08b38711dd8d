"""One real ``redis-server`` for the fault tests (started once, on a free port)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.redis import RedisServer, redis_fixture


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    yield from redis_fixture()
