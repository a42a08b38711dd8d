"""The assertion catalogue of the Write evals page: one row per assertion method of the
eval context, and each row's one-line example runs in a case on the example agent."""

from __future__ import annotations

import inspect
import re
import sys

import pytest
from evalport.client import (
    EvalContext,
    LocalTarget,
    Verdict,
    assertions,
    cases_from,
    eval_case,
    run_trial,
)
from support.docs import DOCS, ROOT

PAGE = DOCS / "write-evals.md"
ROW = re.compile(r"^\| `(\w+)` \((?:`(\w+)`|any `Assertion`)\) \| [^|]+\| `(ctx\..+)` \|$", re.M)


def rows() -> list[tuple[str, str | None, str]]:
    return [(m.group(1), m.group(2), m.group(3)) for m in ROW.finditer(PAGE.read_text())]


def assertion_methods() -> set[str]:
    """The context's methods that return an assertion handle or an expectation."""
    found = set()
    for name, member in inspect.getmembers(EvalContext):
        if name.startswith("_") or not callable(member):
            continue
        returns = str(inspect.signature(member).return_annotation)
        if re.search(r"AssertionHandle|DeferredHandle|ValueExpectation", returns):
            found.add(name)
    return found


def test_every_assertion_method_has_one_row_and_every_row_is_a_method() -> None:
    documented = [method for method, _, _ in rows()]
    assert len(documented) == len(set(documented)), "a method has two rows"
    missing = assertion_methods() - set(documented)
    unknown = set(documented) - assertion_methods()
    assert not missing, f"assertion methods without a catalogue row: {sorted(missing)}"
    assert not unknown, f"catalogue rows naming no assertion method: {sorted(unknown)}"


def test_each_row_names_a_public_assertion_class() -> None:
    for method, cls, _ in rows():
        if cls is not None:
            assert cls in assertions.__all__, (
                f"{method}: {cls} is not in evalport.client.assertions"
            )


@pytest.fixture
def agent():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from support_agent import agent

        yield agent
    finally:
        sys.path.remove(str(ROOT / "examples"))


async def test_every_example_runs_in_a_case(agent) -> None:
    names = {name: getattr(assertions, name) for name in assertions.__all__}
    results = {}
    async with LocalTarget(agent) as target:
        for method, _, example in rows():

            @eval_case(f"catalogue: {method}", id=f"catalogue_{method}")
            async def case(ctx, example=example):
                await ctx.send("I'd like my money back for order A1050.")
                await ctx.send("yes please do")
                handle = eval(example, {**names, "ctx": ctx})
                assert handle is not None

            (built,) = cases_from(case)
            result = await run_trial(built, target)
            results[method] = result
    broken = {
        method: f"{result.error_type}: {result.error}"
        for method, result in results.items()
        if result.verdict == Verdict.ERROR
    }
    assert not broken, f"examples that do not run: {broken}"
    # the examples are written to hold on this conversation, except the soft ones
    failed = [m for m, r in results.items() if r.verdict == Verdict.FAILED]
    assert not failed, f"gate examples that fail on the refund conversation: {failed}"


# -- the judge objects of the Judges page -------------------------------------------------

JUDGE_PAGE = DOCS / "judges.md"
JUDGE_ROW = re.compile(r"^\| (?:`(\w+)`|none) \| `(\w+)` \| `(\w+)` \| `(ctx\..+)` \|$", re.M)


def judge_rows() -> list[tuple[str | None, str, str, str]]:
    text = JUDGE_PAGE.read_text()
    return [(m.group(1), m.group(2), m.group(3), m.group(4)) for m in JUDGE_ROW.finditer(text)]


def test_every_judge_object_and_neuron_judge_has_one_row() -> None:
    from evalport.client import judges
    from evalport.client.assertions import neuron

    objects = {
        name
        for name in judges.__all__
        if isinstance(getattr(judges, name), type)
        and issubclass(getattr(judges, name), judges.JudgeCheck)
        and name != "JudgeCheck"
    }
    documented = [cls for _, cls, _, _ in judge_rows()]
    assert len(documented) == len(set(documented)), "an object has two rows"
    assert set(documented) == objects
    neuron_judges = {name for name in neuron.__all__ if name.endswith("Judge")}
    assert {name for name, _, _, _ in judge_rows() if name} == neuron_judges
    for name, cls, _, _ in judge_rows():
        if name:  # the Neuron name is an alias of the object on its row
            assert getattr(neuron, name) is getattr(judges, cls)
    for _, _, method, _ in judge_rows():
        assert method in judges.criteria.BUILTIN


async def test_every_judge_row_runs_in_a_case_as_its_chain_method(agent) -> None:
    from evalport.client import judges

    names = {name: getattr(judges, name) for name in judges.__all__}
    for _, cls, method, example in judge_rows():
        judge = judges.FakeJudge(default=1.0)

        @eval_case(f"judge catalogue: {cls}", id=f"judge_catalogue_{cls}")
        async def case(ctx, example=example):
            await ctx.send("I'd like my money back for order A1050.")
            await ctx.send("yes please do")
            assert eval(example, {**names, "ctx": ctx}) is not None

        (built,) = cases_from(case)
        async with LocalTarget(agent) as target:
            result = await run_trial(built, target, judge=judge)
        assert result.verdict == Verdict.PASSED, f"{cls}: {result.error}"
        (request,) = judge.requests
        assert request.criterion.name == method  # the criterion the chain method makes
        assert [a.name for a in result.assertions] == [f"judge.{request.criterion.name}"]
