"""Fixtures of the target tests (helpers live in ``target_fixtures``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from evalport.client import HttpTarget, RetryPolicy
from target_fixtures import BASE, TOKEN, Sleeps


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def target(sleeps: Sleeps) -> AsyncIterator[HttpTarget]:
    http = HttpTarget(BASE, token=TOKEN, retry=RetryPolicy(attempts=3, jitter=False, sleep=sleeps))
    yield http
    await http.aclose()
