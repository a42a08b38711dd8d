"""``evalport check`` marks a turn the agent failed, naming the error's type: a server
whose agent raises on every turn is not "15 of 15 checks passed"."""

from __future__ import annotations

import httpx
from evalport.client.cli._check import check_server
from evalport.server import EvalAdapter


async def broken(message: str) -> str:
    raise KeyError("OPENAI_API_KEY")


async def test_a_turn_the_agent_failed_fails_its_check_naming_the_error_type() -> None:
    app = EvalAdapter(broken, token=None, name="broken", version="1").app()
    results = await check_server("http://adapter/", transport=httpx.ASGITransport(app=app))
    by_name = {result.name: result for result in results}
    assert not by_name["turn"].ok
    assert "status failed" in by_name["turn"].detail
    assert "KeyError" in by_name["turn"].detail
    # the protocol checks after it still run: the wire is fine, the agent is not
    assert by_name["attach"].ok and by_name["delete"].ok
