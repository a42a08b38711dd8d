"""Neuron-style class-based evaluators run through the same machinery as function cases."""

from __future__ import annotations

import textwrap
from pathlib import Path

from evalport.client import Evaluator, Verdict, decide_by_tool, discover, evaluator_cases, run_trial
from evalport.client.assertions import CalledTool, Contains, ToolOrder, ToolWasRejected
from fake_target import FakeTarget, shop_agent


class RefundConversation(Evaluator):
    """Refund conversations with scripted approvals."""

    tags = ("refunds",)
    approval_policy = decide_by_tool({"refund": ("reject", "needs a manager")})
    set_ups = 0

    def dataset(self):
        return [
            {"id": "small", "turns": ["hello", "refund A1 40"], "expect": "refunded 40"},
            {"id": "large", "turns": ["refund B2 300"], "expect": "needs a manager"},
        ]

    async def set_up(self) -> None:
        type(self).set_ups += 1

    async def run(self, item):
        await self.ctx.converse(item["turns"])
        return self.ctx.trajectory()

    def evaluate(self, output, item) -> None:
        self.check(Contains(item["expect"]), output.final_answer)
        self.check(ToolOrder(["lookup", "refund"], "subset"), output)
        if item.id == "large":
            self.check(ToolWasRejected("refund"), output)


async def test_each_item_is_a_case_with_set_up_once() -> None:
    cases = evaluator_cases(RefundConversation)
    assert [c.id for c in cases] == ["RefundConversation[small]", "RefundConversation[large]"]
    assert cases[0].description == "Refund conversations with scripted approvals."
    assert cases[0].tags == ("refunds",)
    target = FakeTarget(shop_agent)
    results = [await run_trial(case, target) for case in cases]
    await target.aclose()
    assert [r.verdict for r in results] == [Verdict.PASSED, Verdict.PASSED], [
        (r.error, r.assertions) for r in results
    ]
    assert RefundConversation.set_ups == 1
    assert len(results[1].assertions) == 3


class SyncEvaluator(Evaluator):
    def dataset(self):
        return [{"message": "hello"}, {"message": "refund A1 40"}]

    def run(self, item):
        return self.ctx.send(item["message"]).reply

    def evaluate(self, output, item) -> None:
        self.check(Contains("Hello"), output)
        self.ctx.log(output)
        self.check(CalledTool("refund", count=0))


async def test_sync_evaluators_run_in_a_thread_and_fail_like_cases() -> None:
    target = FakeTarget(shop_agent)
    results = [await run_trial(case, target) for case in evaluator_cases(SyncEvaluator)]
    await target.aclose()
    assert [r.case_id for r in results] == ["SyncEvaluator[0000]", "SyncEvaluator[0001]"]
    assert [r.verdict for r in results] == [Verdict.PASSED, Verdict.FAILED]
    assert results[1].logs == ["refunded 40 on A1"]


class Incomplete(Evaluator):
    def dataset(self):
        return [{"x": 1}]


async def test_missing_methods_are_case_errors_naming_the_method() -> None:
    target = FakeTarget(shop_agent)
    (result,) = [await run_trial(case, target) for case in evaluator_cases(Incomplete)]
    await target.aclose()
    assert result.verdict == Verdict.ERROR
    assert result.error == "Incomplete must implement run(item)"


def test_ctx_outside_an_item_is_a_clear_error() -> None:
    import pytest

    with pytest.raises(RuntimeError, match="only available while an item runs"):
        _ = SyncEvaluator().ctx
    with pytest.raises(TypeError):
        evaluator_cases(object)  # type: ignore[arg-type]


def test_discovery_finds_evaluators_with_datasets_next_to_them(tmp_path: Path) -> None:
    (tmp_path / "ported").mkdir()
    (tmp_path / "ported" / "rows.json").write_text('[{"id": "a", "q": "hello"}]')
    (tmp_path / "ported" / "neuron_eval.py").write_text(
        textwrap.dedent("""
        from evalport.client._evaluator import Evaluator
        from evalport.client.assertions import Contains

        class Greeting(Evaluator):
            def dataset(self):
                return "rows.json"

            async def run(self, item):
                return (await self.ctx.send(item["q"])).reply

            def evaluate(self, output, item):
                self.check(Contains("Hello"), output)
    """)
    )
    cases, errors = discover(tmp_path)
    assert errors == [] and [c.id for c in cases] == ["ported/neuron_eval::Greeting[a]"]
