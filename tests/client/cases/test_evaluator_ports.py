"""What a suite ported from Neuron's evaluators needs (issue 40 items 4 and 7).

Neuron runs an evaluator's items one at a time unless asked; evalport runs them
concurrently (a sync evaluator's items in worker threads, on the one evaluator that
``set_up()`` prepared). ``concurrency = 1`` on the class keeps Neuron's behaviour.
"""

from __future__ import annotations

import threading
import time

from evalport.client import Evaluator, Runner, RunOptions, Verdict, evaluator_cases
from evalport.client.assertions import Contains
from fake_target import FakeTarget, shop_agent


class Counting(Evaluator):
    """Counts the items in flight on the evaluator ``set_up()`` prepared."""

    def dataset(self):
        return [{"message": "hello"} for _ in range(4)]

    prepared: Counting | None = None

    def set_up(self) -> None:
        type(self).prepared = self
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0

    def run(self, item):
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.05)
        reply = self.ctx.send(item["message"]).reply
        with self.lock:
            self.in_flight -= 1
        return reply

    def evaluate(self, output, item) -> None:
        self.check(Contains("Hello"), output)


class OneAtATime(Counting):
    """Neuron's behaviour, in one line."""

    concurrency = 1


async def _most_in_flight(cls: type[Counting]) -> tuple[int, list[str]]:
    cases = evaluator_cases(cls)
    target = FakeTarget(shop_agent)
    report = await Runner(target, RunOptions(concurrency=8)).run(cases)
    await target.aclose()
    assert cls.prepared is not None  # the evaluator the items share
    return cls.prepared.most, [result.verdict for result in report.results]


async def test_concurrency_one_runs_an_evaluators_items_one_at_a_time() -> None:
    most, verdicts = await _most_in_flight(OneAtATime)
    assert verdicts == [Verdict.PASSED] * 4
    assert most == 1


async def test_by_default_items_share_the_set_up_object_concurrently() -> None:
    most, verdicts = await _most_in_flight(Counting)
    assert verdicts == [Verdict.PASSED] * 4
    assert most > 1
    assert "concurrency = 1" in (Evaluator.__doc__ or "")
