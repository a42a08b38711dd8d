"""``evalport run --target a2a+http://...`` and ``[tool.evalport] target`` end to end
against the a2a-sdk server, with the example of the docs' A2A section (``a2a``)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a_agents import NAME, VERSION, a2a_sdk_app
from evalport.protocol._cli import main
from support.docs import section_blocks
from support.servers import running_server

pytestmark = pytest.mark.e2e

WHY = "A2A agents do not report their tool calls"


@pytest.fixture(scope="module")
def a2a_url() -> Iterator[str]:
    with running_server(a2a_sdk_app()) as url:
        yield url


def suite(folder: Path) -> list[str]:
    """The docs' example suite written under ``folder``; the command it shows, as words."""
    [code] = section_blocks("a2a", "python")
    [command] = section_blocks("a2a", "bash")
    (folder / "evals").mkdir()
    (folder / "evals" / "booking_eval.py").write_text(code)
    return shlex.split(command)


def outcome(report: Path) -> tuple[dict, dict]:
    """The run's summary and its one case."""
    summary = json.loads(report.read_text())
    [case] = summary["cases"]
    return summary, case


def test_the_docs_example_runs_against_an_a2a_agent(tmp_path, monkeypatch, a2a_url) -> None:
    words = suite(tmp_path)
    assert words[:2] == ["evalport", "run"] and "a2a+http://127.0.0.1:8765" in words
    monkeypatch.chdir(tmp_path)
    args = [word.replace("http://127.0.0.1:8765", a2a_url) for word in words[1:]]
    assert main(args) == 0
    summary, case = outcome(tmp_path / "report.json")
    # The soft called_tool is not evaluable: the case is scored, neither passed nor failed.
    assert (summary["counts"]["failed"], summary["counts"]["error"]) == (0, 0)
    assert case["assertions"]["contains"]["passed"] == 1
    assert case["assertions"]["called_tool"]["not_evaluated"] == 1
    assert any(WHY in failure for failure in case["failures"])
    assert case["trial_details"][0]["reply"] == "Booked a table for 4."
    text = json.dumps(summary)
    assert NAME in text and VERSION in text  # the card heads the report


def test_the_target_of_pyproject_is_an_a2a_agent(tmp_path, monkeypatch, a2a_url) -> None:
    suite(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f'[tool.evalport]\ntarget = "a2a+{a2a_url}"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["run", "evals", "--json", "report.json"]) == 0
    summary, case = outcome(tmp_path / "report.json")
    assert (summary["counts"]["failed"], summary["counts"]["error"]) == (0, 0)
    assert case["assertions"]["contains"]["passed"] == 1


def test_without_the_extra_the_target_says_so_and_exits_2(tmp_path, monkeypatch, capsys) -> None:
    suite(tmp_path)
    monkeypatch.chdir(tmp_path)
    # As if a2a-sdk were not installed: its modules cannot be imported, nor the target's.
    for name in [name for name in sys.modules if name == "a2a" or name.startswith("a2a.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "evalport.client._core.targets._a2a_link")
    assert main(["run", "evals", "--target", "a2a+http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'evalport[a2a]'" in err
