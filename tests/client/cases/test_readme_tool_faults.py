"""The documentation's tool-faults subsection (in the `assertions` section): its example runs and
its case passes against the example support agent; without the faults it would not."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from evalport.client import LocalTarget, Verdict, cases_from, eval_case, run_trial
from support.docs import docs_text

ROOT = Path(__file__).resolve().parents[3]
HEADING = "### Tool faults: does the agent cope when a tool fails?"


def block() -> str:
    text = docs_text()
    section = text.split("<!-- section:assertions -->")[1].split("<!-- /section:assertions -->")[0]
    subsection = section.split(HEADING)[1].split("\n### ")[0]
    (code,) = re.findall(r"```python\n(.*?)```", subsection, re.DOTALL)
    return code


@pytest.fixture
def examples_on_path():
    sys.path.insert(0, str(ROOT / "examples"))
    yield
    sys.path.remove(str(ROOT / "examples"))


def test_the_example_runs_and_its_case_passes(examples_on_path, capsys) -> None:
    exec(compile(block(), "README:tool-faults", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip() == "passed"


async def test_the_case_holds_because_of_its_faults(examples_on_path) -> None:
    from support_agent import agent

    namespace: dict[str, object] = {"__name__": "readme"}
    code = block().replace("asyncio.run(main())", "")
    exec(compile(code, "README:tool-faults", "exec"), namespace)
    case = cases_from(namespace["service_down"])[0]
    assert [fault.turns for fault in case.faults] == [[1]]
    plain = cases_from(eval_case(case.description)(case.func))[0]
    async with LocalTarget(agent) as target:
        faulted = await run_trial(case, target)
        unfaulted = await run_trial(plain, target)
    assert faulted.verdict == Verdict.PASSED
    assert unfaulted.verdict == Verdict.FAILED
    failed = [a.name for a in unfaulted.assertions if not a.passed]
    assert failed == [
        'tool_was_injected(order_status, args ⊆ {order_id="A1049"})',
        "no status invented",
        "says it cannot check now",
    ]
