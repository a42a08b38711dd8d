"""A session store must not evict: `serve` refuses a Redis whose maxmemory-policy evicts
keys (exit 2, one line), unless told otherwise, and a session lost to eviction is logged."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import redis
from evalport.server.stores import RedisStore
from serverkit import TOKEN
from storekit import new
from support.redis import running_redis
from support.servers import free_port, running_process

SERVE = [sys.executable, "-m", "evalport.protocol._cli", "serve", "examples/support_agent.py:agent"]


def _serve(url: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVE, "--store", url, "--port", str(free_port()), *options],
        env={"EVALPORT_TOKEN": TOKEN, "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_refuses_a_redis_that_evicts_keys() -> None:
    with running_redis() as server:
        redis.Redis(port=server.port).config_set("maxmemory-policy", "allkeys-lru")
        refused = _serve(server.url)
        assert refused.returncode == 2, refused.stderr
        said = [line for line in refused.stderr.splitlines() if "maxmemory-policy" in line]
        assert said == [
            "evalport serve: the session store's maxmemory-policy is allkeys-lru: Redis would "
            "evict live sessions once full; set maxmemory-policy noeviction (or pass "
            "--allow-eviction)"
        ]


async def test_a_session_lost_to_eviction_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with running_redis() as server:
        store = RedisStore(server.url)
        try:
            assert await store.create(new("s1", ttl=600, limit=10))
            assert await store.eviction_policy() == "noeviction"
            redis.Redis(port=server.port).delete(f"{store.prefix}s:{{s1}}")  # as eviction does
            with caplog.at_level(logging.WARNING, logger="evalport.server"):
                assert await store.read("s1") is None
            assert "session s1 vanished from Redis before its TTL" in caplog.text
        finally:
            await store.aclose()


def test_allow_eviction_starts_all_the_same() -> None:
    with running_redis() as server:
        redis.Redis(port=server.port).config_set("maxmemory-policy", "allkeys-lru")
        port = free_port()
        args = [*SERVE, "--store", server.url, "--port", str(port), "--allow-eviction"]
        with running_process(
            args, health_url=f"http://127.0.0.1:{port}/health", env={"EVALPORT_TOKEN": TOKEN}
        ) as process:
            assert process.poll() is None
