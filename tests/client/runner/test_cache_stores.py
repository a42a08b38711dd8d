"""Run cache stores (issue 19, item 8): Redis shared by shards on two machines, your own store.

A real ``redis-server`` on a loopback port; ``evalport run`` in separate processes, each
in its own copy of the project (two CI machines), with no cache folder in common.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis
from evalport.client import RedisCacheStore, RunCache, Runner, RunOptions, Verdict
from evalport.client._core._cache_stores import open_cache_store
from runner_memory import MemoryTarget, SimpleCase, simple_trial
from support.redis import RedisServer, running_redis
from support.servers import free_port

pytestmark = pytest.mark.e2e

AGENT = """\
import asyncio
import os
from pathlib import Path


async def agent(message: str, history: list, ctx) -> str:
    with Path(os.environ["CALLS_FILE"]).open("a") as calls:
        calls.write(message + "\\n")
    return f"echo: {message}"
"""

SUITE = """\
from evalport.client import eval_case


@eval_case("one")
async def one(ctx):
    await ctx.send("one")
    ctx.contains("echo: one")


@eval_case("two")
async def two(ctx):
    await ctx.send("two")
    ctx.contains("echo: two")
"""


@pytest.fixture(scope="module")
def redis_server():
    with running_redis() as server:
        yield server


@pytest.fixture
def machines(tmp_path: Path) -> list[Path]:
    """Two checkouts of one project, as two CI machines have them."""
    folders = []
    for name in ("machine-a", "machine-b"):
        folder = tmp_path / name / "project"
        (folder / "evals").mkdir(parents=True)
        (folder / "evals" / "echo_eval.py").write_text(SUITE)
        (folder / "echo_agent.py").write_text(AGENT)
        folders.append(folder)
    return folders


def evalport_run(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "CALLS_FILE": str(folder / "calls.txt")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "evalport.protocol._cli",
            "run",
            "evals",
            "--local",
            "echo_agent.py:agent",
            "--cache",
            "--out",
            "run",
            *options,
        ],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def calls(folder: Path) -> list[str]:
    path = folder / "calls.txt"
    return path.read_text().split() if path.exists() else []


def keys(server: RedisServer) -> list[str]:
    with redis.Redis(port=server.port, decode_responses=True) as client:
        return sorted(client.scan_iter("*"))


def flush(server: RedisServer) -> None:
    with redis.Redis(port=server.port) as client:
        client.flushall()


def test_two_shards_in_two_processes_share_recordings(redis_server, machines) -> None:
    flush(redis_server)
    first, second = machines
    store = f"{redis_server.url}?namespace=shop"
    done = evalport_run(first, "--cache-store", store, "--shard", "1/2")
    assert done.returncode == 0, done.stderr
    assert "run cache: 0 of 1 trials replayed" in done.stdout
    done = evalport_run(second, "--cache-store", store, "--shard", "2/2")
    assert done.returncode == 0, done.stderr
    recorded = calls(first) + calls(second)
    assert sorted(recorded) == ["one", "two"]

    # Each machine now runs the whole suite: nothing reaches the agent, on either machine.
    for folder in machines:
        done = evalport_run(folder, "--cache-store", store, "-v")
        assert done.returncode == 0, done.stderr
        assert "run cache: 2 of 2 trials replayed" in done.stdout, done.stdout
    assert sorted(calls(first) + calls(second)) == ["one", "two"]
    assert not (first / ".evalport" / "cache").exists()  # no folder was written

    found = keys(redis_server)
    assert found and all(key.startswith("evalport:run-cache:shop:") for key in found)
    assert {key.split(":")[3].partition("/")[0] for key in found} == {"recordings", "slots"}
    # another namespace shares nothing
    done = evalport_run(first, "--cache-store", f"{redis_server.url}?namespace=other")
    assert "run cache: 0 of 2 trials replayed" in done.stdout


def test_recordings_of_another_evalport_version_are_not_reused(
    redis_server, machines, monkeypatch
) -> None:
    flush(redis_server)
    first, second = machines
    assert evalport_run(first, "--cache-store", redis_server.url).returncode == 0
    monkeypatch.setattr("evalport.client._core._cache.__version__", "0.0.1-older")
    monkeypatch.setattr("evalport.client._core._caching.__version__", "0.0.1-older")
    # what an older evalport wrote under its own keys is not read by this one
    done = evalport_run(second, "--cache-store", redis_server.url, "-v")
    assert "run cache: 2 of 2 trials replayed" in done.stdout  # same version: shared

    async def older_run() -> RunCache:
        from evalport.client import LocalTarget, discover

        os.environ["CALLS_FILE"] = str(second / "older-calls.txt")
        sys.path.insert(0, str(second))
        try:
            from echo_agent import agent  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(second))
        cases, _ = discover(str(second / "evals"))
        cache = RunCache(RedisCacheStore(redis_server.url))
        target = LocalTarget(agent, location="echo_agent.py:agent")
        report = await Runner(target, RunOptions(), cache=cache).run(list(cases))
        await cache.aclose()
        assert [case.verdict for case in report.summary.cases] == [Verdict.PASSED] * 2
        assert report.summary.cached_trials == 0
        return cache

    cache = asyncio.run(older_run())
    assert len(cache.misses) == 2
    assert all("evalport changed (" in miss and "-> 0.0.1-older)" in miss for miss in cache.misses)


def test_a_redis_that_goes_down_mid_run_loses_no_verdict(machines) -> None:
    with running_redis() as server:
        first, _ = machines
        assert evalport_run(first, "--cache-store", server.url).returncode == 0
        server.stop()
        done = evalport_run(first, "--cache-store", server.url)
        assert done.returncode == 0, done.stderr
        assert "run cache: 0 of 2 trials replayed" in done.stdout
        assert done.stderr.count("evalport run: warning: run cache: cannot read") == 1
        assert f"in {server.url}:" in done.stderr
        assert "the rest of the run goes without the cache" in done.stderr
        assert sorted(calls(first)) == ["one", "one", "two", "two"]  # the second run: live


async def test_a_store_failing_between_trials_skips_the_recording_and_keeps_verdicts(
    tmp_path,
) -> None:
    with running_redis() as server:

        class StoppingTarget(MemoryTarget):
            async def open(self, **kwargs):  # the store dies while trial "b" runs
                session = await super().open(**kwargs)
                if kwargs.get("case_id") == "b":
                    server.stop()
                return session

        cache = RunCache(RedisCacheStore(server.url, timeout=2.0))
        cases = [SimpleCase(id=name, messages=["echo"]) for name in ("a", "b", "c")]
        runner = Runner(
            StoppingTarget(), RunOptions(concurrency=1), cache=cache, trial_function=simple_trial
        )
        report = await runner.run(cases)
        await cache.aclose()
    assert [case.verdict for case in report.summary.cases] == [Verdict.PASSED] * 3
    assert len(cache.errors) == 1 and "cannot write" in cache.errors[0]
    assert not cache.usable


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("redis://127.0.0.1:99999/0", "port"),
        ("redis://h/0?namespace=a&namespace=b", "namespace is given once"),
        ("redis://h/0?colour=blue", "unknown option colour"),
        ("no_such_module_here:Store", "cannot import module"),
        ("just-a-word", "neither a Redis URL"),
    ],
)
def test_a_bad_store_is_exit_2_naming_the_option(machines, spec: str, says: str) -> None:
    done = evalport_run(machines[0], "--cache-store", spec)
    assert done.returncode == 2
    assert "--cache-store (cache-store)" in done.stderr and says in done.stderr
    assert "--cache-dir" in done.stderr
    with pytest.raises(ValueError, match=says):
        open_cache_store(spec)


def test_the_store_comes_from_pyproject(redis_server, machines) -> None:
    flush(redis_server)
    first, _ = machines
    (first / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [tool.evalport]
            cache = true
            cache-store = "{redis_server.url}?namespace=configured"
            """
        )
    )
    assert evalport_run(first).returncode == 0
    assert keys(redis_server) and all(
        key.startswith("evalport:run-cache:configured:") for key in keys(redis_server)
    )


def test_nothing_listens_at_start_is_a_warning_not_a_failure(machines) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    done = evalport_run(machines[0], "--cache-store", url)
    assert done.returncode == 0 and "run cache: 0 of 2 trials replayed" in done.stdout
    assert "the rest of the run goes without the cache" in done.stderr


TOY_STORE = """\
ENTRIES = {}


class DictStore:
    async def get(self, key):
        return ENTRIES.get(key)

    async def put(self, key, value):
        ENTRIES[key] = value

    async def aclose(self):
        pass
"""


def test_a_store_of_your_own_by_module_name(machines, monkeypatch, capsys) -> None:
    from evalport.protocol._cli import main

    first, _ = machines
    (first / "toy_cache_store.py").write_text(TOY_STORE)
    monkeypatch.chdir(first)
    monkeypatch.setenv("CALLS_FILE", str(first / "calls.txt"))
    monkeypatch.syspath_prepend(str(first))
    args = ["run", "evals", "--local", "echo_agent.py:agent", "--cache", "--out", "run"]
    args += ["--cache-store", "toy_cache_store:DictStore"]
    assert main(args) == 0
    assert main(args) == 0
    assert "run cache: 2 of 2 trials replayed" in capsys.readouterr().out
    assert sorted(calls(first)) == ["one", "two"]  # the second run replayed both
    import toy_cache_store  # type: ignore[import-not-found]

    assert {key.partition("/")[0] for key in toy_cache_store.ENTRIES} == {"recordings", "slots"}
    (first / "not_a_store.py").write_text("class Thing:\n    pass\n")
    assert main([*args[:-1], "not_a_store:Thing"]) == 2
    assert "made a Thing, not a cache store" in capsys.readouterr().err


def test_without_the_redis_extra_the_error_says_what_to_install(machines, monkeypatch, capsys):
    from evalport.protocol._cli import main

    monkeypatch.setitem(sys.modules, "redis", None)  # as if redis-py were not installed
    with pytest.raises(ValueError, match=r"pip install 'evalport\[redis\]'"):
        open_cache_store("redis://127.0.0.1:6379/0")
    monkeypatch.chdir(machines[0])
    args = ["run", "evals", "--local", "echo_agent.py:agent", "--cache", "--out", "run"]
    assert main([*args, "--cache-store", "redis://127.0.0.1:6379/0"]) == 2
    err = capsys.readouterr().err
    assert "--cache-store (cache-store)" in err and "evalport[redis]" in err
