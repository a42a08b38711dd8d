"""The smaller messages of the new user's trial: the agent version shown the same by
``check`` and ``run``, ``view`` of a file, a misspelt option suggested, and ``evalport new
case`` writing a case that fails until it is edited."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from evalport.client import LocalTarget, cases_from, run_trial
from evalport.client.cli._check import check_server
from evalport.client.cli._scaffold import case_file
from evalport.protocol._cli import main
from evalport.server import EvalAdapter


async def agent(message: str) -> str:
    return "Hello! How can I help?"


async def test_check_names_an_unversioned_agent_as_run_does() -> None:
    app = EvalAdapter(agent, token=None, name="greeter").app()
    results = await check_server("http://agent/", transport=httpx.ASGITransport(app=app))
    assert results[0].name == "health" and results[0].detail == "greeter, unversioned"


def test_view_of_a_file_says_it_is_not_a_folder(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results.json"
    results.write_text("{}")
    assert main(["view", str(results)]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err


def test_a_misspelt_option_is_suggested(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["run", "evals", "--exclude-tags", "slow"])
    err = capsys.readouterr().err
    assert "--exclude-tags" in err and "did you mean --exclude-tag?" in err


async def test_a_new_case_fails_until_it_is_edited(tmp_path: Path) -> None:
    namespace: dict[str, object] = {}
    exec(compile(case_file("greets"), str(tmp_path / "greets_eval.py"), "exec"), namespace)
    async with LocalTarget(agent) as target:
        result = await run_trial(cases_from(namespace["greets"])[0], target)
    assert result.verdict == "failed"
    assert any("edit" in a.message.lower() or "EDIT" in a.name for a in result.assertions)
