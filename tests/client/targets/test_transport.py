"""HttpTarget's one wire, httpx, on real sockets: timeouts, the error classes the retry
rules read, the pool bound, headers and cookies, and mocks that see every call."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
import respx
from evalport.client import HttpTarget, RetryPolicy, TargetUnavailable
from evalport.protocol import __version__
from evalport.server import EvalAdapter
from support.servers import running_server

pytestmark = pytest.mark.e2e


async def no_wait(delay: float) -> None:
    return None


RETRY = RetryPolicy(attempts=3, sleep=no_wait)
TOKEN = "transport-token-0123456789"


class Loopback:
    """A loopback listener that reads each request and then stays silent or hangs up."""

    def __init__(self, behaviour: str, backlog: int = 64, accept: bool = True) -> None:
        self.behaviour = behaviour
        self.requests = 0
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(backlog)
        self.listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True) if accept else None

    def _serve(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                connection, _ = self.listener.accept()
                connection.settimeout(2)
                with contextlib.suppress(OSError):
                    if _read_request(connection):
                        self.requests += 1
                if self.behaviour == "hangup":
                    connection.close()
                else:
                    self._held.append(connection)

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        if self._thread is not None:
            self._thread.start()
        try:
            yield self.url
        finally:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(5)
            for connection in self._held:
                connection.close()
            self.listener.close()


def _read_request(connection: socket.socket) -> bool:
    """Read one whole request (head and ``Content-Length`` body): closing a socket with
    unread bytes sends a reset, which a client reads as ``ReadError``, not a hang-up."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = connection.recv(65536)
        if not chunk:
            return bool(received)
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return True


def target(url: str, **options: object) -> HttpTarget:
    return HttpTarget(url, health_check=False, retry=RETRY, **options)  # type: ignore[arg-type]


async def test_a_silent_server_is_a_read_timeout_that_a_create_never_repeats() -> None:
    server = Loopback("silent")
    with server.running() as url:
        async with target(url, timeout=httpx.Timeout(5.0, read=0.3)) as http:
            with pytest.raises(TargetUnavailable, match=r"after 1 attempt\(s\): ReadTimeout"):
                await http.open()
            await asyncio.sleep(0.1)
            assert server.requests == 1
            with pytest.raises(TargetUnavailable, match=r"after 3 attempt\(s\): ReadTimeout"):
                await http.check()  # GET /health is idempotent: every attempt is made
    assert server.requests == 4


async def test_a_server_that_hangs_up_is_a_protocol_error_and_a_create_is_not_repeated() -> None:
    # Sent, maybe processed: creating again could leave a second session behind.
    server = Loopback("hangup")
    with server.running() as url:
        async with target(url) as http:
            with pytest.raises(TargetUnavailable, match="RemoteProtocolError"):
                await http.open()
            await asyncio.sleep(0.1)
    assert server.requests == 1


async def test_a_refused_connection_is_a_connect_error_that_every_mode_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # bound, not listening: refused
        async with target(url) as http:
            with pytest.raises(TargetUnavailable, match=r"after 3 attempt\(s\): ConnectError"):
                await http.open()


async def test_a_connection_never_accepted_is_a_connect_timeout_that_a_create_retries() -> None:
    # A full accept queue makes the kernel drop the SYN: the connect hangs.
    server = Loopback("silent", backlog=0, accept=False)
    fillers = []
    with server.running() as url:
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(server.listener.getsockname())
            fillers.append(filler)
        try:
            async with target(url, timeout=httpx.Timeout(5.0, connect=0.2)) as http:
                with pytest.raises(
                    TargetUnavailable, match=r"after 3 attempt\(s\): ConnectTimeout"
                ):
                    await http.open()
        finally:
            for filler in fillers:
                filler.close()


async def test_the_pool_bound_waits_then_raises_pool_timeout() -> None:
    server = Loopback("silent")
    with server.running() as url:
        http = target(
            url,
            timeout=httpx.Timeout(5.0, read=3.0, pool=0.2),
            limits=httpx.Limits(max_connections=1),
        )
        async with http:
            first = asyncio.create_task(http.open())  # holds the only connection
            await asyncio.sleep(0.1)
            with pytest.raises(TargetUnavailable, match=r"after 1 attempt\(s\): PoolTimeout"):
                await http.open()
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError, TargetUnavailable):
                await first
    assert server.requests == 1


async def test_a_real_server_over_the_pool() -> None:
    async def agent(message: str, history: object, ctx: object) -> str:
        return f"echo: {message}"

    with running_server(EvalAdapter(agent, token=TOKEN).app("/agent")) as url:
        async with HttpTarget(f"{url}/agent", token=TOKEN, retry=RETRY) as http:
            sessions = [await http.open() for _ in range(3)]
            turns = await asyncio.gather(*(s.send(f"q{i}") for i, s in enumerate(sessions)))
            assert [turn.reply for turn in turns] == ["echo: q0", "echo: q1", "echo: q2"]
            for session in sessions:
                await session.close()


@pytest.mark.parametrize("using", ["httpcore", "httpx"])
async def test_respx_sees_every_request_and_nothing_reaches_the_server(using: str) -> None:
    reached: list[str] = []

    async def agent(message: str, history: object, ctx: object) -> str:
        reached.append(message)
        return "from the real server"

    with running_server(EvalAdapter(agent, token=TOKEN).app("/agent")) as url:
        with respx.mock(using=using, base_url=f"{url}/agent", assert_all_called=True) as router:
            router.get("/health").respond(json={"protocol": "1.0"})
            router.post("/evals/sessions").respond(201, json={"sessionId": "mocked"})
            router.post("/evals/sessions/mocked/turns").respond(
                json={"run": {"reply": "from the mock", "status": "completed", "turns": 1}}
            )
            async with HttpTarget(f"{url}/agent", token=TOKEN) as http:
                session = await http.open()
                assert (await session.send("hi")).reply == "from the mock"
        assert reached == []
        async with HttpTarget(
            f"{url}/agent", token=TOKEN
        ) as http:  # the mock is gone: the real server
            session = await http.open()
            assert (await session.send("hi")).reply == "from the real server"
            await session.close()
    assert reached == ["hi"]


async def test_a_servers_cookies_and_the_base_headers_go_with_every_request() -> None:
    # a server's cookies (a sticky load balancer's, say) are sent back to it
    seen: list[dict[str, str]] = []

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        assert scope["type"] == "http"
        headers = {key.decode(): value.decode() for key, value in scope["headers"]}
        seen.append(headers)
        body = b'{"sessionId": "s1"}' if scope["method"] == "POST" else b"{}"
        await send(  # type: ignore[operator]
            {
                "type": "http.response.start",
                "status": 201 if scope["method"] == "POST" else 200,
                "headers": [(b"content-type", b"application/json"), (b"set-cookie", b"lb=a1")],
            }
        )
        await send({"type": "http.response.body", "body": body})  # type: ignore[operator]

    with running_server(app) as url:
        async with HttpTarget(url, token=TOKEN, headers={"X-Team": "evals"}, retry=RETRY) as http:
            await http.check()
            await http.open()
    assert "cookie" not in seen[0] and seen[1]["cookie"] == "lb=a1"
    assert all(headers["authorization"] == f"Bearer {TOKEN}" for headers in seen)
    assert all(headers["x-team"] == "evals" for headers in seen)
    assert seen[1]["content-type"] == "application/json"
    assert all(headers["user-agent"] == f"evalport/{__version__}" for headers in seen)


async def test_the_user_agent_is_evalport_unless_the_caller_names_one() -> None:
    seen: list[list[tuple[str, str]]] = []
    named = (b"user-agent", b"accept", b"authorization")

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        seen.append([(k.decode(), v.decode()) for k, v in scope["headers"] if k in named])
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]

    calls: list[dict[str, object]] = [
        {},
        {"headers": {"User-Agent": "ci-smoke/2"}},
        # any case replaces the default: one header each, the caller's
        {"headers": {"user-agent": "ci/2", "accept": "x/y", "AUTHORIZATION": "Bearer theirs"}},
        {"headers": {"authorization": "Bearer theirs"}, "token": TOKEN},  # the token wins
    ]
    with running_server(app) as url:
        for options in calls:
            async with target(url, **options) as http:
                await http._channel.request("GET", "health", mode="idempotent")
    assert [sorted(headers) for headers in seen] == [
        [("accept", "application/json"), ("user-agent", f"evalport/{__version__}")],
        [("accept", "application/json"), ("user-agent", "ci-smoke/2")],
        [("accept", "x/y"), ("authorization", "Bearer theirs"), ("user-agent", "ci/2")],
        [
            ("accept", "application/json"),
            ("authorization", f"Bearer {TOKEN}"),
            ("user-agent", f"evalport/{__version__}"),
        ],
    ]


async def test_a_response_header_of_9000_bytes_is_read() -> None:
    # httpx (h11) reads heads of up to 100 KiB; aiohttp's own bound was 8190 bytes a line
    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        head = [(b"x-debug", b"a" * 9000), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": head})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]

    with running_server(app) as url:
        async with target(url) as http:
            reply = await http._channel.request("GET", "health", mode="idempotent")
    assert reply.headers["x-debug"] == "a" * 9000


async def test_a_closed_target_sends_nothing_and_says_so() -> None:
    requests: list[str] = []

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        requests.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]

    with running_server(app) as url:
        http = target(url)
        async with http:
            await http._channel.request("GET", "health", mode="idempotent")
        with pytest.raises(RuntimeError, match="was closed"):
            await http._channel.request("GET", "health", mode="idempotent")
        with pytest.raises(RuntimeError, match="was closed"):
            await http.open()
    assert requests == ["/health"]


async def test_a_proxy_named_in_the_environment_carries_the_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # httpx's reading of the environment, untouched: the proxy sees the absolute target
    seen: list[tuple[str, str]] = []

    async def proxy(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        headers = {key.decode(): value.decode() for key, value in scope["headers"]}
        seen.append((headers["host"], headers.get("authorization", "")))
        body = b'{"protocol": "1.0"}'
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": body})  # type: ignore[operator]

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with running_server(proxy) as url:
        monkeypatch.setenv("HTTP_PROXY", url)
        async with HttpTarget("http://agent.test/", token=TOKEN, retry=RETRY) as http:
            assert (await http.check()).protocol == "1.0"
    assert seen == [("agent.test", f"Bearer {TOKEN}")]
