"""``evalport run``, ``compare`` and ``merge`` as a team uses them: through the command
dispatcher, on a suite written to disk, against the example agent in-process (--local)."""

import json
import textwrap
import threading
from pathlib import Path

import pytest
from evalport.protocol._cli import main
from support.servers import free_port

AGENT = str(Path(__file__).resolve().parents[3] / "examples" / "support_agent.py") + ":agent"

SUITE = """
from evalport.client._core._cases import eval_case


@eval_case("status of A1049", tags=["status"])
async def status(ctx):
    await ctx.send("where is order A1049?")
    ctx.contains("shipped")
    ctx.called_tool("order_status", {"order_id": "A1049"})


@eval_case("greets", tags=["smalltalk"])
async def greeting(ctx):
    await ctx.send("hello")
    ctx.contains("Hi!")


@eval_case("expects the wrong thing", tags=["broken"])
async def wrong(ctx):
    await ctx.send("where is order A1051?")
    ctx.contains("delivered")
"""

REPORTER = """
import json


class CountingReporter:
    def __init__(self, path):
        self.path = path
        self.trials = 0

    def trial_done(self, trial):
        self.trials += 1

    def finish(self, report):
        with open(self.path, "w") as file:
            json.dump({"trials": self.trials, "passed": report.summary.counts["passed"]}, file)
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "support_eval.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "counting_reporters.py").write_text(textwrap.dedent(REPORTER))
    (tmp_path / "pyproject.toml").write_text(
        "[tool.evalport]\n"
        'path = "evals"\n'
        f'local = "{AGENT}"\n'
        "concurrency = 4\n"
        'reporters = [{use = "counting_reporters:CountingReporter", path = "counted.json"}]\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def results(path: Path) -> dict:
    return json.loads(path.read_text())


def test_run_from_config_exit_1_on_a_failed_case(project, capsys):
    code = main(["run", "--json", "out.json", "--out", "run"])
    output = capsys.readouterr().out
    assert code == 1
    assert "FAIL   support_eval::wrong" in output
    assert "2 passed, 1 failed, 0 error, 0 skipped, 0 scored" in output
    summary = results(project / "out.json")
    assert summary["counts"]["failed"] == 1 and summary["provenance"]["concurrency"] == 4
    assert results(project / "counted.json") == {"trials": 3, "passed": 2}
    assert (project / "run" / "summary.json").is_file()


def test_selection_list_and_exit_0(project, capsys):
    assert main(["run", "--list", "-k", "not wrong"]) == 0
    assert capsys.readouterr().out.split() == ["support_eval::status", "support_eval::greeting"]
    assert (
        main(["run", "--list", "--tag", "status", "--tag", "broken", "--exclude-tag", "broken"])
        == 0
    )
    assert capsys.readouterr().out.split() == ["support_eval::status"]
    assert main(["run", "--exclude-tag", "broken", "--repeat", "2", "--json", "ok.json"]) == 0
    summary = results(project / "ok.json")
    assert summary["total"] == 2 and summary["trials"] == 4


def test_usage_and_configuration_errors_exit_2(project, capsys):
    assert main(["run", "-k", "status and"]) == 2
    assert "expected a word" in capsys.readouterr().err
    assert main(["run", "--pass-rate", "2"]) == 2
    assert "pass-rate must be within [0, 1]" in capsys.readouterr().err
    assert main(["run", "missing-folder"]) == 2
    assert "missing-folder: no such file or folder" in capsys.readouterr().err
    assert main(["run", "--local", "no_such_module:agent"]) == 2
    assert "cannot import module 'no_such_module'" in capsys.readouterr().err
    assert main(["run", "-k", "nothing_matches_this"]) == 2
    assert "-k left out all" in capsys.readouterr().err
    (project / "pyproject.toml").write_text("[tool.evalport]\nrepeats = 2\n")
    assert main(["run", "evals"]) == 2
    assert "unknown field `repeats`" in capsys.readouterr().err


MARKING_STORE = """
from pathlib import Path


class MarkingStore:
    async def get(self, key):
        return None

    async def put(self, key, value):
        pass

    async def aclose(self):
        Path("store-closed").write_text("closed")
"""


def _exporting_threads() -> set[threading.Thread]:
    # the SDK batch processor's thread (OtelBatchSpanRecordProcessor)
    return {thread for thread in threading.enumerate() if thread.name.startswith("OtelBatch")}


def test_what_a_run_opened_is_closed_when_its_configuration_fails(project, capsys):
    before = _exporting_threads()
    cache = ["--cache", "--cache-store", "no_such_module:Store"]
    assert main(["run", *cache, "--otlp", "http://127.0.0.1:9/v1/traces"]) == 2
    assert "--cache-store" in capsys.readouterr().err
    assert _exporting_threads() == before  # the span exporter was shut down
    (project / "marking_store.py").write_text(MARKING_STORE)
    cache = ["--cache", "--cache-store", "marking_store:MarkingStore"]
    assert main(["run", *cache, "--local", "no_such_module:agent"]) == 2
    assert "no_such_module" in capsys.readouterr().err
    assert (project / "store-closed").read_text() == "closed"


def test_unreachable_target_exits_3(project, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["run", "--target", url, "--exclude-tag", "broken"]) == 3
    assert "unreachable" in capsys.readouterr().err


def test_cache_replays_and_marks_cached_trials(project, capsys):
    args = ["run", "--exclude-tag", "broken", "--cache", "--cache-dir", "rec", "--repeat", "2"]
    assert main([*args, "--json", "first.json"]) == 0
    assert results(project / "first.json")["cached_trials"] == 0
    assert main([*args, "--json", "second.json"]) == 0
    second = results(project / "second.json")
    assert second["cached_trials"] == 4
    assert all(case["cached_trials"] == 2 for case in second["cases"])
    assert "4 cached" in capsys.readouterr().out
    assert main([*args, "--fresh", "--json", "third.json"]) == 0
    assert results(project / "third.json")["cached_trials"] == 0


def test_shards_merge_compare_and_baseline(project, capsys):
    assert main(["run", "--shard", "1/2", "--json", "a.json"]) in (0, 1)
    assert main(["run", "--shard", "2/2", "--json", "b.json"]) in (0, 1)
    shard_ids = [
        c["case_id"] for name in ("a.json", "b.json") for c in results(project / name)["cases"]
    ]
    assert sorted(shard_ids) == sorted(
        ["support_eval::status", "support_eval::greeting", "support_eval::wrong"]
    )
    capsys.readouterr()
    assert main(["merge", "a.json", "b.json", "-o", "all.json", "--junit", "all.xml"]) == 1
    merged = results(project / "all.json")
    assert merged["total"] == 3 and merged["counts"]["failed"] == 1
    assert main(["merge", "a.json", "a.json"]) == 2
    assert "appears in two shards" in capsys.readouterr().err

    assert main(["run", "--exclude-tag", "broken", "--json", "base.json"]) == 0
    (project / "evals" / "support_eval.py").write_text(
        textwrap.dedent(SUITE).replace('ctx.contains("Hi!")', 'ctx.contains("Bye!")')
    )
    capsys.readouterr()
    code = main(["run", "--exclude-tag", "broken", "--baseline", "base.json", "--json", "new.json"])
    assert code == 1
    assert "regression support_eval::greeting: passed -> failed" in capsys.readouterr().out
    assert main(["compare", "base.json", "new.json"]) == 0
    assert main(["compare", "base.json", "new.json", "--fail-on-regression"]) == 1
    assert "1 regressed, 0 fixed" in capsys.readouterr().out


def test_a_file_that_fails_to_load_is_reported_and_fails_the_run(project, capsys):
    (project / "evals" / "broken_eval.py").write_text("import no_such_dependency\n")
    code = main(["run", "--exclude-tag", "broken", "--junit", "junit.xml", "--json", "r.json"])
    assert code == 1
    output = capsys.readouterr().out
    assert "LOAD ERROR" in output and "no_such_dependency" in output
    assert any(line.endswith(", 1 eval file(s) failed to load") for line in output.splitlines())
    assert "broken_eval.py: ModuleNotFoundError" in results(project / "r.json")["load_errors"][0]
    assert 'name="load error"' in (project / "junit.xml").read_text()


def test_explicit_config_file(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("elsewhere") / "pyproject.toml"
    other.write_text(f'[tool.evalport]\nlocal = "{AGENT}"\nrepeat = 3\n')
    assert main(["run", "evals", "--config", str(other), "-k", "status", "--json", "c.json"]) == 0
    summary = results(project / "c.json")
    assert summary["trials"] == 3 and summary["provenance"]["repeat"] == 3


ATTACH_SUITE = """
from evalport.client._core._cases import eval_case


@eval_case("the conversation someone else had")
async def inspect_existing(ctx):
    ctx.contains("shipped")
    ctx.called_tool("order_status", {"order_id": "A1049"})
"""


@pytest.mark.e2e
def test_attach_evaluates_an_existing_session_over_http(project, monkeypatch, capsys):
    import asyncio
    import sys

    from evalport.client import HttpTarget
    from evalport.server import EvalAdapter
    from support.servers import running_server

    sys.path.insert(0, str(Path(AGENT.rsplit(":", 1)[0]).parent))
    from support_agent import agent

    (project / "evals" / "support_eval.py").write_text(textwrap.dedent(ATTACH_SUITE))
    monkeypatch.setenv("EVALPORT_TOKEN", "attach-token-0123456789")
    with running_server(EvalAdapter(agent, token="attach-token-0123456789").app()) as url:

        async def converse() -> str:
            async with HttpTarget(url, token="attach-token-0123456789") as target:
                session = await target.open()
                await session.send("where is order A1049?")
                return session.id

        session_id = asyncio.run(converse())
        args = ["run", "--target", url, "--token-env", "EVALPORT_TOKEN", "--attach", session_id]
        assert main([*args, "--json", "attached.json"]) == 0
        summary = results(project / "attached.json")
        assert summary["counts"]["passed"] == 1

        async def still_there() -> int:
            async with HttpTarget(url, token="attach-token-0123456789") as target:
                return (await target.attach(session_id)).run.turns

        assert asyncio.run(still_there()) == 1  # attached, inspected, never deleted


def test_a_target_without_the_mount_prefix_says_so_and_exits_2(project, capsys):
    """The server answered 404 on /health: not unreachable (exit 3) but the wrong path,
    and the message names the prefix a mounted adapter's address includes."""
    import sys

    from support.servers import running_process

    port = free_port()
    root = Path(__file__).resolve().parents[3]
    serve = [sys.executable, "-m", "evalport.protocol._cli", "serve"]
    serve += [str(root / "examples" / "support_agent.py") + ":agent", "--port", str(port)]
    serve += ["--prefix", "/agent", "--insecure-no-auth"]
    health = f"http://127.0.0.1:{port}/agent/health"
    with running_process(serve, health_url=health, env={"EVALPORT_TOKEN": ""}):
        url = f"http://127.0.0.1:{port}"
        assert main(["run", "--target", url, "--exclude-tag", "broken"]) == 2
        err = capsys.readouterr().err
        assert f"{url}/ is not the adapter's address" in err and "//health" not in err
        assert "includes its prefix (for example http://HOST:PORT/agent)" in err
        assert main(["check", url]) == 2  # the same mistake, the same exit code as run
        err = capsys.readouterr().err
        assert "/health answered 404: the server answered, but the evalport protocol" in err
        assert main(["run", "--target", url + "/agent", "--exclude-tag", "broken"]) == 0


def test_a_reporter_of_the_project_folder_needs_no_pythonpath(project):
    """`evalport` (the console script, whose sys.path does not hold the folder it runs in)
    finds the reporter module beside pyproject.toml, as it finds --local's module."""
    import os
    import subprocess
    import sys

    evalport = Path(sys.executable).with_name("evalport")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(evalport), "run", "--exclude-tag", "broken"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((project / "counted.json").read_text())
