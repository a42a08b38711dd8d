"""The documentation's `assertions` section: every code block in it runs, and its cases pass."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from evalport.client import LocalTarget, Verdict, cases_from, run_trial
from support.docs import docs_text

ROOT = Path(__file__).resolve().parents[3]


def blocks() -> list[str]:
    text = docs_text()
    section = text.split("<!-- section:assertions -->")[1].split("<!-- /section:assertions -->")[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


@pytest.fixture
def examples_on_path():
    sys.path.insert(0, str(ROOT / "examples"))
    yield
    sys.path.remove(str(ROOT / "examples"))


def test_the_section_has_five_python_blocks() -> None:
    assert len(blocks()) == 5  # the fifth: tool faults (test_readme_tool_faults.py)


async def test_the_case_blocks_pass_against_the_example_agent(examples_on_path) -> None:
    from support_agent import agent

    namespace: dict[str, object] = {}
    exec(compile(blocks()[0], "README:cases", "exec"), namespace)
    exec(compile(blocks()[1], "README:approvals", "exec"), namespace)
    cases = [
        *cases_from(namespace["refund_needs_confirmation"]),
        *cases_from(namespace["status"]),
        *cases_from(namespace["big_refunds_are_rejected"]),
    ]
    assert [c.id for c in cases] == [
        "refund_needs_confirmation",
        "status[shipped]",
        "status[processing]",
        "big_refunds_are_rejected",
    ]
    async with LocalTarget(agent) as target:
        results = [await run_trial(case, target) for case in cases]
    assert [r.verdict for r in results] == [Verdict.PASSED] * 4, [
        (r.error, [a for a in r.assertions if not a.passed]) for r in results
    ]


def test_the_standalone_block_runs(examples_on_path, capsys) -> None:
    namespace: dict[str, object] = {}
    exec(compile(blocks()[0], "README:cases", "exec"), namespace)
    exec(compile(blocks()[3], "README:standalone", "exec"), namespace)
    assert capsys.readouterr().out.splitlines() == [
        "refund_needs_confirmation passed",
        "status[shipped] passed",
        "status[processing] passed",
        "True",
        "True",
    ]


async def test_the_declared_conversation_block_passes(examples_on_path) -> None:
    from support_agent import agent

    namespace: dict[str, object] = {}
    exec(compile(blocks()[2], "README:declared", "exec"), namespace)
    cases = [*cases_from(namespace["scripted_refund"]), *cases_from(namespace["simulated_status"])]
    async with LocalTarget(agent) as target:
        results = [await run_trial(case, target) for case in cases]
    assert [len(r.assertions) for r in results] == [1, 1]
    assert [r.verdict for r in results] == [Verdict.PASSED] * 2, [
        (r.error, [a for a in r.assertions if not a.passed]) for r in results
    ]
