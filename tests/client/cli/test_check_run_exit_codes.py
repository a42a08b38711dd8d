"""``evalport check`` and ``evalport run`` give the same exit code for the same mistake
(configuration 2, unreachable 3), and the same hint for a wrong address: "drop the path"
when the server's root answers the protocol, a host's own short 404 text quoted."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalport.protocol._cli import main
from evalport.server import EvalAdapter
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from support.servers import running_server

TOKEN = "exit-codes-token-0123456789"


async def agent(message: str) -> str:
    return "hello"


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "hello_eval.py").write_text(
        "from evalport.client import eval_case\n\n\n@eval_case('hi')\n"
        "async def hi(ctx):\n    await ctx.send('hi')\n    ctx.contains('hello')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    return tmp_path / "evals"


def both(evals: Path, url: str, capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str]]:
    """``check URL`` and ``run --target URL``: each one's exit code and stderr."""
    outcomes = []
    for argv in (["check", url, "--timeout", "5"], ["run", str(evals), "--target", url]):
        code = main(argv)
        outcomes.append((code, capsys.readouterr().err))
    return outcomes


def test_a_url_without_a_scheme_is_a_usage_error_for_both(evals, capsys) -> None:
    for code, err in both(evals, "127.0.0.1:9", capsys):
        assert code == 2, err
        assert "http" in err and "unreachable" not in err


def test_nothing_listening_is_unreachable_for_both(evals, capsys) -> None:
    for code, err in both(evals, "http://127.0.0.1:9", capsys):
        assert code == 3, err


def test_a_path_the_protocol_is_not_at_says_drop_the_path_for_both(evals, capsys) -> None:
    with running_server(EvalAdapter(agent, token=TOKEN).app()) as url:
        outcomes = both(evals, url + "/agent", capsys)
    for code, err in outcomes:
        assert code == 2, err
        assert "drop the path" in err and url + "/" in err


def test_a_hosts_own_404_text_is_quoted_for_both(evals, capsys) -> None:
    async def nothing(request):
        return PlainTextResponse("No such app on this host", status_code=404)

    app = Starlette(routes=[Route("/{path:path}", nothing)])
    with running_server(app) as url:
        outcomes = both(evals, url, capsys)
    for code, err in outcomes:
        assert code == 2, err
        assert "No such app on this host" in err


def test_a_refused_token_is_a_configuration_error_for_both(evals, capsys, monkeypatch) -> None:
    monkeypatch.setenv("EVALPORT_TOKEN", "wrong-" + "x" * 20)
    with running_server(EvalAdapter(agent, token=TOKEN).app()) as url:
        outcomes = both(evals, url, capsys)
    for code, err in outcomes:
        assert code == 2, err
        assert "EVALPORT_TOKEN" in err
