"""Which wire a channel sends over: httpx's wherever httpx would proxy or a mock listens."""

from __future__ import annotations

import httpx
import pytest
import respx
from evalport.client import HttpTarget
from evalport.client._transport import AiohttpWire, HttpxWire, mocked, proxied
from evalport.server import EvalAdapter
from support.servers import running_server

TOKEN = "wire-choice-token-0123456789"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


# (NO_PROXY, URL, whether httpx sends through HTTPS_PROXY/HTTP_PROXY): httpx's reading,
# which differs from urllib's proxy_bypass (".corp.example" leaves corp.example proxied)
NO_PROXY_CASES = [
    ("", "https://corp.example/", True),
    ("corp.example", "https://corp.example/", False),
    ("corp.example", "https://api.corp.example/", False),
    ("corp.example", "https://xcorp.example/", True),
    (".corp.example", "https://corp.example/", True),
    (".corp.example", "https://api.corp.example/", False),
    ("*.corp.example", "https://api.corp.example/", True),
    ("*", "https://corp.example/", False),
    ("other.example, *", "https://corp.example/", False),
    ("corp.example:8443", "https://corp.example:8443/", False),
    ("corp.example:8443", "https://corp.example/", True),
    ("corp.example:443", "https://corp.example/", True),
    ("CORP.example", "https://corp.example/", False),
    ("localhost", "http://localhost:8000/", False),
    ("localhost", "http://api.localhost:8000/", True),
    ("127.0.0.1", "http://127.0.0.1:8000/", False),
    ("10.0.0.0/8", "https://10.1.2.3/", True),
    ("::1", "http://[::1]:8000/", False),
    ("http://corp.example", "http://corp.example/", False),
    ("http://corp.example", "https://corp.example/", True),
]


@pytest.mark.parametrize(("no_proxy", "url", "expected"), NO_PROXY_CASES)
def test_the_httpx_wire_is_chosen_wherever_httpx_would_proxy(
    environment: pytest.MonkeyPatch, no_proxy: str, url: str, expected: bool
) -> None:
    scheme = httpx.URL(url).scheme
    environment.setenv(f"{scheme.upper()}_PROXY", "http://proxy.test:3128")
    environment.setenv("NO_PROXY", no_proxy)
    assert proxied(httpx.URL(url)) is expected
    wire = HttpTarget(url)._channel._wire()
    assert isinstance(wire, HttpxWire if expected else AiohttpWire)


def test_no_proxy_for_the_scheme_is_no_proxy_and_all_proxy_counts(
    environment: pytest.MonkeyPatch,
) -> None:
    environment.setenv("HTTP_PROXY", "http://proxy.test:3128")
    assert not proxied(httpx.URL("https://corp.example/"))
    assert proxied(httpx.URL("http://corp.example/"))
    environment.setenv("ALL_PROXY", "http://proxy.test:3128")
    assert proxied(httpx.URL("https://corp.example/"))


@pytest.mark.e2e
async def test_respx_using_httpx_sees_every_request_and_nothing_reaches_the_server() -> None:
    reached: list[str] = []

    async def agent(message: str, history: object, ctx: object) -> str:
        reached.append(message)
        return "from the real server"

    with running_server(EvalAdapter(agent, token=TOKEN).app("/agent")) as url:
        with respx.mock(using="httpx", base_url=f"{url}/agent", assert_all_called=True) as router:
            router.get("/health").respond(json={"protocol": "1.0"})
            router.post("/evals/sessions").respond(201, json={"sessionId": "mocked"})
            router.post("/evals/sessions/mocked/turns").respond(
                json={"run": {"reply": "from the mock", "status": "completed", "turns": 1}}
            )
            assert mocked()
            async with HttpTarget(f"{url}/agent", token=TOKEN) as http:
                session = await http.open()
                assert (await session.send("hi")).reply == "from the mock"
        assert not mocked()
    assert reached == []
