"""Every CI workflow evalport shows (the one ``evalport init`` writes and each one in the
docs) waits for the served agent the same way before its first request: a job that starts
``evalport serve ... &`` and calls it at once fails on a slow runner."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from evalport.client.cli._scaffold import WORKFLOW
from support.docs import blocks, pages


def serve_then_next(workflow: str) -> tuple[str, dict[str, Any]]:
    """The port ``evalport serve`` listens on, and the step that follows it."""
    steps = yaml.safe_load(workflow)["jobs"]["evals"]["steps"]
    for index, step in enumerate(steps):
        run = step.get("run", "")
        if run.startswith("evalport serve ") and run.endswith("&"):
            return run.split("--port ")[1].split()[0], steps[index + 1]
    raise AssertionError(f"no 'evalport serve ... &' step in:\n{workflow}")


def documented() -> list[tuple[str, str]]:
    return [
        (f"{page.name} block {index + 1}", code)
        for page in pages()
        for index, (language, code) in enumerate(blocks(page.read_text(encoding="utf-8")))
        if language == "yaml" and "evalport serve " in code
    ]


def test_the_docs_show_workflows() -> None:
    assert {where.split()[0] for where, _ in documented()} >= {"ci.md", "get-started.md"}


@pytest.mark.parametrize(("where", "workflow"), documented(), ids=[w for w, _ in documented()])
def test_a_documented_workflow_waits_as_init_writes_it(where: str, workflow: str) -> None:
    port, wait = serve_then_next(WORKFLOW.format(agent="agent.py:agent", folder="evals", port=8765))
    assert wait["name"] == "wait for the agent" and "/health" in wait["run"]
    documented_port, documented_wait = serve_then_next(workflow)
    assert documented_wait == yaml.safe_load(
        yaml.safe_dump(wait).replace(f":{port}/", f":{documented_port}/")
    ), where
