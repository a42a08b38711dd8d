"""The documentation's `replicas` section runs here: its command line, its Redis URL forms and its two-replica example."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from evalport.protocol._redis_url import parse_redis_url
from evalport.server._cli import add_arguments
from evalport.server.stores import RedisStore
from support.docs import docs_text
from support.redis import RedisServer

ROOT = Path(__file__).parents[3]
TOKEN = "readme-replicas-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def section_blocks(language: str) -> list[str]:
    text = docs_text()
    start = text.index("<!-- section:replicas -->")
    end = text.index("<!-- /section:replicas -->")
    return re.findall(rf"```{language}\n(.*?)```", text[start:end], flags=re.DOTALL)


def test_the_serve_command_line_parses() -> None:
    [command] = section_blocks("bash")
    words = shlex.split(command)
    words = words[words.index("serve") + 1 :]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(words)
    assert args.store == "redis://redis:6379/0" and args.host == "0.0.0.0"


async def test_the_example_continues_a_session_on_another_replica(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/5"
    with redis.Redis.from_url(url) as plain:
        plain.flushdb()
    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    monkeypatch.setenv("REDIS_URL", url)
    [code] = section_blocks("python")
    replicas: list[dict[str, Any]] = []
    for _ in range(2):
        namespace: dict[str, Any] = {"__name__": "readme_block"}
        exec(compile(code, "README.md", "exec"), namespace)
        replicas.append(namespace)
    a, b = (
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=ns["app"]), base_url="http://svc", headers=AUTH
        )
        for ns in replicas
    )
    try:
        assert isinstance(replicas[0]["adapter"].sessions.store, RedisStore)
        created = await a.post("/evals/sessions", json={})
        turns = f"/evals/sessions/{created.json()['sessionId']}/turns"
        first = await a.post(turns, json={"message": "A1"})
        assert first.json()["run"]["reply"] == "orders so far: A1"
        second = await b.post(turns, json={"message": "A2"})
        assert second.json()["run"]["reply"] == "orders so far: A1, A2"
        third = await a.post(turns, json={"message": "and?"})
        assert third.json()["run"]["reply"] == "orders so far: A1, A2"
        assert third.json()["run"]["turns"] == 3
    finally:
        for client, namespace in zip((a, b), replicas, strict=True):
            await client.aclose()
            await namespace["adapter"].aclose()


def test_serve_refuses_an_unknown_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalport.protocol._cli import main

    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    agent = str(Path(__file__).with_name("agents.py")) + ":agent"
    assert main(["serve", agent, "--store", "postgres://db/0"]) == 2
    assert "use 'memory' or a Redis URL" in capsys.readouterr().err


def test_every_url_form_of_the_section_is_one_the_store_parses() -> None:
    [forms] = [block for block in section_blocks("text") if "redis://" in block]
    schemes = set(re.findall(r"(?m)(?:^|\s)([a-z+]+)://", forms))
    # the parser's own list of schemes, as its error for an unknown one gives it
    with pytest.raises(ValueError) as unknown:
        parse_redis_url("nope://host")
    assert schemes == set(re.findall(r"([a-z+]+)://", str(unknown.value))) - {"nope"}
    examples = {"unix": "unix:///tmp/redis.sock?db=2"}
    for scheme in schemes:
        service = "/mymaster" if "sentinel" in scheme else ""
        url = examples.get(scheme, f"{scheme}://app:secret@h1:7000,h2:7001{service}")
        if scheme in {"redis", "rediss"}:
            url = f"{scheme}://app:secret@h1:7000/3"
        parsed = parse_redis_url(url)
        assert parsed.tls == scheme.startswith("rediss"), url
        assert parsed.kind == {"redis": "server", "rediss": "server"}.get(
            scheme, scheme.rpartition("+")[2]
        ), url
