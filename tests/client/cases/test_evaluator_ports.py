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


class Replies(Evaluator):
    """What run() returns is the item's output."""

    def dataset(self):
        return [{"id": "text", "message": "hello"}, {"id": "view", "message": "refund A1 40"}]

    async def run(self, item):
        turn = await self.ctx.send(item["message"])
        return turn.reply if item.id == "text" else self.ctx.trajectory()

    def evaluate(self, output, item) -> None:
        self.check(Contains("e"), output)


class Structured(Evaluator):
    def dataset(self):
        return [{"message": "hello"}]

    def run(self, item):
        return {"reply": self.ctx.send(item["message"]).reply, "unreadable": object()}

    def evaluate(self, output, item) -> None:
        self.check(Contains("Hello"), output["reply"])


async def test_what_run_returns_is_recorded_in_results_reports_and_view(tmp_path) -> None:
    import json

    from evalport.client.reports import html_report, write_run_folder

    target = FakeTarget(shop_agent)
    report = await Runner(target).run(evaluator_cases(Replies) + evaluator_cases(Structured))
    await target.aclose()
    text, view, structured = (result.trials[0] for result in report.results)
    assert text.output == "Hello! How can I help?"
    assert view.output == "refunded 40 on A1"  # a trajectory is recorded as its final answer
    assert structured.output["reply"] == "Hello! How can I help?"
    assert structured.output["unreadable"].startswith("<object object at")
    folder = write_run_folder(report, tmp_path / "run")
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert lines[0]["trials"][0]["output"] == "Hello! How can I help?"
    trial_files = sorted((folder / "cases").glob("*/trial-0.json"))
    assert any(json.loads(p.read_text())["output"] == "refunded 40 on A1" for p in trial_files)
    page = html_report(report)
    assert "<h4>output</h4>" in page and "refunded 40 on A1" in page
