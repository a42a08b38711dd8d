"""The runner over the real protocol: HttpTarget -> ASGITransport -> the server adapter
serving the example agent, with the example suite (multi-turn, approvals, datasets)."""

import sys
from pathlib import Path

import httpx
from evalport.client import HttpTarget, LocalTarget, RunCache, Runner, RunOptions, Verdict, discover
from evalport.server import EvalAdapter

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))
from support_agent import agent  # noqa: E402

TOKEN = "runner-token-0123456789"


class CountingTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(f"{request.method} {request.url.path}")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def http_target() -> tuple[HttpTarget, CountingTransport]:
    transport = CountingTransport(httpx.ASGITransport(app=EvalAdapter(agent, token=TOKEN).app()))
    return HttpTarget("http://agent.test/", token=TOKEN, transport=transport), transport


async def test_example_suite_over_http_with_repetition_and_the_run_cache(tmp_path):
    cases, errors = discover(ROOT / "examples" / "evals")
    assert errors == [] and len(cases) == 9
    options = RunOptions(repeat=2, concurrency=8)

    target, transport = http_target()
    async with target:
        report = await Runner(target, options, cache=RunCache(tmp_path)).run(cases)
    assert report.summary.counts[Verdict.PASSED] == 9, [c.failures for c in report.summary.cases]
    assert report.summary.provenance.target["agent_version"] == "1.0.0"
    assert report.summary.cached_trials == 0
    turns = [path for path in transport.paths if path.endswith("/turns")]
    deletes = [path for path in transport.paths if path.startswith("DELETE")]
    opens = [path for path in transport.paths if path == "POST /evals/sessions"]
    assert len(opens) == len(deletes) == 18  # a fresh session per trial, always closed
    assert len(turns) >= 18

    target, transport = http_target()
    async with target:
        again = await Runner(target, options, cache=RunCache(tmp_path)).run(cases)
    assert again.summary.counts[Verdict.PASSED] == 9
    # every trial but the receipt case's two: a session that sends an image is never recorded
    assert again.summary.cached_trials == 16
    live = [
        path.split()[0] + (" turn" if path.endswith("/turns") else "") for path in transport.paths
    ]
    assert (
        sorted(kind for kind in live if kind != "GET")
        == ["DELETE"] * 2 + ["POST"] * 2 + ["POST turn"] * 2
    )


async def test_local_and_http_targets_give_the_same_verdicts():
    cases, _ = discover(ROOT / "examples" / "evals")
    target, _ = http_target()
    async with target:
        remote = await Runner(target).run(cases)
    local = await Runner(LocalTarget(agent)).run(cases)
    assert [c.verdict for c in remote.summary.cases] == [c.verdict for c in local.summary.cases]
    assert [len(r.trials[0].run["tools"]) for r in remote.results] == [
        len(r.trials[0].run["tools"]) for r in local.results
    ]


PARTS_SUITE = """
from evalport.client import eval_case


@eval_case("an image first")
async def image_first(ctx):
    await ctx.send("Where is the order on this receipt?", image="receipt.png")


@eval_case("an image after a text turn")
async def image_later(ctx):
    await ctx.send("hello")
    await ctx.send("Where is the order on this receipt?", image="receipt.png")
"""


async def test_a_session_that_sends_images_says_so_as_its_reason_on_every_run(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "parts_eval.py").write_text(PARTS_SUITE)
    (tmp_path / "evals" / "receipt.png").write_bytes(
        (ROOT / "examples" / "evals" / "receipt.png").read_bytes()
    )
    cases, errors = discover(tmp_path / "evals")
    assert errors == [] and len(cases) == 2
    reason = "sends images or files, which are never recorded"
    for _ in range(2):
        runner = Runner(LocalTarget(agent), cache=RunCache(tmp_path / "cache"))
        report = await runner.run(cases)
        assert report.summary.cached_trials == 0
        assert sorted(runner.cache.misses) == [
            f"parts_eval::image_first [trial 0]: {reason}",
            f"parts_eval::image_later [trial 0]: {reason}",
        ]
