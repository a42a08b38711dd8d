"""Every report names the agent the same way: its version, or "unversioned" (never "agent 0")."""

from __future__ import annotations

from pathlib import Path

from evalport.client.reports._base import agent_label
from evalport.protocol._cli import main


def test_an_agent_without_a_version_is_unversioned_not_zero() -> None:
    assert agent_label({"agent_name": "agent", "agent_version": "0"}) == "agent, unversioned"
    assert agent_label({"agent_name": "support", "agent_version": "2.1"}) == "support 2.1"


def test_the_console_html_and_markdown_say_unversioned(tmp_path: Path, capsys) -> None:
    (tmp_path / "agent.py").write_text("async def agent(message):\n    return 'hi'\n")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "hi_eval.py").write_text(
        "from evalport.client import eval_case\n\n\n"
        "@eval_case\nasync def hi(ctx):\n    await ctx.send('hello')\n    ctx.contains('hi')\n"
    )
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    argv = ["run", str(tmp_path / "evals"), "--local", f"{tmp_path / 'agent.py'}:agent"]
    assert main([*argv, "--html", str(html), "--md", str(md), "--out", str(tmp_path / "o")]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "(agent, unversioned)" in header and "agent 0" not in header
    assert "agent, unversioned" in html.read_text() and "agent 0" not in html.read_text()
    assert "(agent, unversioned)" in md.read_text()
