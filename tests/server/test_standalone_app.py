"""``EvalAdapter.app()``: the lean ASGI app's dispatch, its problems and its non-HTTP scopes."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from evalport.protocol import PROBLEM_CONTENT_TYPE, decode_run
from evalport.server import EvalAdapter, ProtocolApp
from serverkit import AUTH, TOKEN, Build, echo_agent, open_session
from starlette.applications import Starlette
from starlette.routing import Mount

PROBLEM = "urn:evalport:problem:"
RAW_AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]


def kind(response: httpx.Response) -> str:
    assert response.headers["content-type"] == PROBLEM_CONTENT_TYPE, response.text
    return str(response.json()["type"]).removeprefix(PROBLEM)


async def call(
    app: Any,
    method: str,
    path: str,
    /,
    *,
    root_path: str = "",
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
    overrides: dict[str, Any] | None = None,
) -> tuple[int, dict[bytes, bytes], bytes, dict[str, Any]]:
    """One request straight through the ASGI interface: status, headers, body and the scope."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": [(b"host", b"agent.test"), *(RAW_AUTH if headers is None else headers)],
        "server": ("agent.test", 80),
        "client": ("127.0.0.1", 1234),
        **(overrides or {}),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"], scope


@pytest.fixture
async def adapter() -> Any:
    made = EvalAdapter(echo_agent, token=TOKEN)
    yield made
    await made.aclose()


# -- dispatch --------------------------------------------------------------------------------


def test_app_is_our_own_asgi_app_not_starlette() -> None:
    app = EvalAdapter(echo_agent, token=TOKEN).app()
    assert isinstance(app, ProtocolApp) and not isinstance(app, Starlette)


@pytest.mark.parametrize("prefix", ["", "/agent", "/a/b"])
async def test_every_route_is_dispatched_under_its_prefix(build: Build, prefix: str) -> None:
    _, client = build(prefix=prefix)
    assert (await client.get(f"{prefix}/health")).status_code == 200
    created = await client.post(f"{prefix}/evals/sessions", json={})
    assert created.status_code == 201
    session_id = created.json()["sessionId"]
    assert created.headers["location"] == f"{prefix}/evals/sessions/{session_id}"
    session = f"{prefix}/evals/sessions/{session_id}"
    turn = await client.post(f"{session}/turns", json={"message": "A1"})
    assert decode_run(turn.content).reply == "A1 #1"
    assert (await client.get(session)).content == turn.content
    approvals = await client.post(f"{session}/approvals", json={"decisions": {}})
    assert kind(approvals) == "not-suspended"  # the approvals endpoint answered
    assert (await client.delete(session)).status_code == 204
    assert kind(await client.get(session)) == "session-not-found"
    if prefix:  # the routes live under the prefix only
        assert kind(await client.get("/health")) == "not-found"


async def test_approvals_route_exists_only_when_enabled(build: Build) -> None:
    _, client = build(approvals=False)
    session_id = await open_session(client)
    response = await client.post(f"/evals/sessions/{session_id}/approvals", json={"decisions": {}})
    assert (response.status_code, kind(response)) == (404, "not-found")


@pytest.mark.parametrize(
    "session_id", ["a b", "a.b", "..", "~x", "a:b@c", "ü-\N{SNOWMAN}", "%2F", "a;b=c", "-"]
)
async def test_odd_but_legal_session_ids_reach_the_endpoint(
    adapter: EvalAdapter, session_id: str
) -> None:
    app = adapter.app("/agent")
    for method, path in (
        ("GET", f"/agent/evals/sessions/{session_id}"),
        ("DELETE", f"/agent/evals/sessions/{session_id}"),
        ("POST", f"/agent/evals/sessions/{session_id}/turns"),
        ("POST", f"/agent/evals/sessions/{session_id}/approvals"),
    ):
        body = b'{"message": "x"}' if path.endswith("turns") else b'{"decisions": {}}'
        status, _, content, scope = await call(
            app,
            method,
            path,
            body=body,
            headers=[*RAW_AUTH, (b"content-type", b"application/json")],
        )
        assert status == 404 and b"session-not-found" in content, content
        assert scope["path_params"] == {"session_id": session_id}


async def test_path_params_of_a_host_mount_are_kept(adapter: EvalAdapter) -> None:
    app = adapter.app()
    _, _, _, scope = await call(
        app, "GET", "/evals/sessions/s1", overrides={"path_params": {"tenant": "t1"}}
    )
    assert scope["path_params"] == {"tenant": "t1", "session_id": "s1"}


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "",
        "/evals",
        "/evals/sessionsx",
        "/evals/sessions//turns",
        "/evals/sessions/a/b",
        "/evals/sessions/a/turns/x",
        "/evals/sessions/a/turnsx",
        "/healthz",
        "/agent/health",
    ],
)
async def test_unknown_paths_are_404_problems_before_auth(adapter: EvalAdapter, path: str) -> None:
    status, headers, content, _ = await call(adapter.app(), "GET", path, headers=[])
    assert status == 404 and headers[b"content-type"] == PROBLEM_CONTENT_TYPE.encode()
    problem = httpx.Response(
        status, headers={"content-type": PROBLEM_CONTENT_TYPE}, content=content
    )
    assert kind(problem) == "not-found"
    assert problem.json()["detail"] == "No such route."


async def test_a_trailing_slash_is_a_404_naming_the_path_without_it(build: Build) -> None:
    _, client = build(prefix="/agent")
    for path in ("/agent/health/", "/agent/evals/sessions/", "/agent/evals/sessions/s1/turns//"):
        response = await client.get(path)
        assert (response.status_code, kind(response)) == (404, "not-found")
        assert "location" not in response.headers
        assert response.json()["instance"] == path
        detail = response.json()["detail"]
        assert detail == f"No such route; without the trailing slash it is {path.rstrip('/')}."
    assert (await client.get("/agent/nothing/")).json()["detail"] == "No such route."


# -- methods ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/evals/sessions", "POST"),
        ("TRACE", "/evals/sessions", "POST"),
        ("POST", "/health", "GET, HEAD"),
        ("PUT", "/evals/sessions/s1", "GET, DELETE, HEAD"),
        ("GET", "/evals/sessions/s1/turns", "POST"),
        ("BREW", "/evals/sessions/s1/approvals", "POST"),
    ],
)
async def test_a_wrong_method_is_the_routes_405_after_auth(
    client: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await client.request(method, path)
    assert (response.status_code, kind(response)) == (405, "method-not-allowed")
    assert response.headers["allow"] == allow
    unauthenticated = await client.request(method, path, headers={"Authorization": ""})
    assert kind(unauthenticated) == "unauthorized"


async def test_head_answers_the_get_routes(client: httpx.AsyncClient) -> None:
    session_id = await open_session(client)
    for path in ("/health", f"/evals/sessions/{session_id}"):
        get, head = await client.get(path), await client.head(path)
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["content-length"] == get.headers["content-length"]
    assert (await client.head("/evals/sessions")).status_code == 405


# -- root_path and hosts ---------------------------------------------------------------------


async def test_a_proxy_root_path_is_stripped_and_kept_in_answers(adapter: EvalAdapter) -> None:
    transport = httpx.ASGITransport(app=adapter.app("/agent"), root_path="/proxy")
    async with httpx.AsyncClient(
        transport=transport, base_url="http://agent.test", headers=AUTH
    ) as client:
        assert (await client.get("/proxy/agent/health")).status_code == 200
        created = await client.post("/proxy/agent/evals/sessions")
        assert created.headers["location"].startswith("/proxy/agent/evals/sessions/")
        missing = await client.get("/proxy/agent/evals/sessions/gone")
        assert missing.json()["instance"] == "/proxy/agent/evals/sessions/gone"
        # Like Starlette: a path that does not continue the root path is matched whole.
        assert (await client.get("/proxyx/agent/health")).status_code == 404
        assert (await client.get("/agent/health")).status_code == 200


async def test_the_root_path_itself_and_a_bare_root_are_routed_like_starlette(
    adapter: EvalAdapter,
) -> None:
    app = adapter.app("/agent")
    assert (await call(app, "GET", "/agent/health", root_path="/agent/health"))[0] == 404
    assert (await call(app, "GET", "/r/agent/health", root_path="/r"))[0] == 200


async def test_it_serves_mounted_in_a_starlette_host(adapter: EvalAdapter) -> None:
    host = Starlette(routes=[Mount("/t/{tenant}", app=adapter.app("/agent"))])
    transport = httpx.ASGITransport(app=host)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://agent.test", headers=AUTH
    ) as client:
        created = await client.post("/t/acme/agent/evals/sessions")
        assert created.status_code == 201
        turn = await client.post(created.headers["location"] + "/turns", json={"message": "A1"})
        assert decode_run(turn.content).reply == "A1 #1"


# -- non-HTTP and malformed scopes -----------------------------------------------------------


async def test_lifespan_is_acknowledged(adapter: EvalAdapter) -> None:
    events = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return events.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await adapter.app()({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]


@pytest.mark.parametrize(
    ("scope_type", "expected"),
    [("websocket", [{"type": "websocket.close", "code": 1000, "reason": ""}]), ("other", [])],
)
async def test_websockets_are_closed_and_other_scopes_ignored(
    adapter: EvalAdapter, scope_type: str, expected: list[dict[str, Any]]
) -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("nothing to receive")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": scope_type, "path": "/health", "headers": [], "root_path": ""}
    await adapter.app()(scope, receive, send)
    assert sent == expected


@pytest.mark.parametrize(
    "broken",
    [
        {"path": b"/health"},
        {"path": None},
        {"root_path": 3},
        {"headers": None},
        {"method": ["GET"]},
        {"path_params": ["tenant"]},
    ],
)
async def test_a_malformed_scope_is_a_500_problem_not_an_exception(
    adapter: EvalAdapter, broken: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="evalport.server"):
        status, headers, content, _ = await call(
            adapter.app(), "GET", "/evals/sessions/s1", overrides=broken
        )
    assert status == 500 and headers[b"content-type"] == PROBLEM_CONTENT_TYPE.encode()
    assert b"internal" in content and b"Traceback" not in content
    error_id = content.decode().rsplit("error id ", 1)[1].split(")")[0]
    assert error_id in caplog.text


async def test_known_routes_answer_as_the_starlette_mounted_routes_do(
    adapter: EvalAdapter,
) -> None:
    lean, mounted = adapter.app("/agent"), Starlette(routes=adapter.routes("/agent"))
    session_id = json.loads((await call(lean, "POST", "/agent/evals/sessions"))[2])["sessionId"]
    requests = [
        ("GET", "/agent/health", b""),
        ("HEAD", "/agent/health", b""),
        ("PUT", "/agent/evals/sessions", b""),
        ("GET", f"/agent/evals/sessions/{session_id}", b""),
        ("PATCH", f"/agent/evals/sessions/{session_id}", b""),
        ("POST", f"/agent/evals/sessions/{session_id}/turns", b"{"),
        ("POST", f"/agent/evals/sessions/{session_id}/turns", b'{"message": 1}'),
        ("POST", f"/agent/evals/sessions/{session_id}/approvals", b'{"decisions": {}}'),
        ("DELETE", "/agent/evals/sessions/no-such-session", b""),
    ]
    for method, path, body in requests:
        answers = [await call(app, method, path, body=body) for app in (lean, mounted)]
        (status, headers, content, _), (status2, headers2, content2, _) = answers
        assert (status, headers, content) == (status2, headers2, content2), (method, path)


async def test_an_unknown_path_in_a_scope_without_headers_is_still_a_404_problem(
    adapter: EvalAdapter,
) -> None:
    status, _, content, _ = await call(adapter.app(), "GET", "/nope/", overrides={"headers": None})
    assert status == 404 and json.loads(content)["instance"] == "/nope/"
