"""The pytest plugin, used the way a team uses it: a test file run by pytest in a subprocess
against the example agent served by real uvicorn on loopback."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from evalport.server import EvalAdapter
from support.servers import running_server

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))
from support_agent import agent  # noqa: E402

TOKEN = "plugin-token-0123456789"

SUITE = """
import pytest
from evalport.client._core._conversation import reject_all


async def test_status(evalport):
    await evalport.send("Where is my order A1049?")
    evalport.contains("shipped")
    evalport.called_tool("order_status", {"order_id": "A1049"})


async def test_wrong_expectation_fails(evalport):
    await evalport.send("Where is my order A1049?")
    evalport.contains("delivered")


async def test_verify_inside_the_test(evalport):
    await evalport.send("hello")
    evalport.contains("nothing like this")
    await evalport.verify()
    raise AssertionError("not reached: verify failed the test")


@pytest.mark.evalport(approval_policy=reject_all("too expensive"))
async def test_rejected_refund(evalport):
    await evalport.converse(["I want a refund for order A1049", "yes"])
    evalport.contains("cannot refund")
    evalport.tool_was_rejected("refund_order", {"order_id": "A1049"})
"""


def run_pytest(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_agent_evals.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


@pytest.mark.e2e
def test_plugin_runs_evals_against_a_live_server(tmp_path):
    app = EvalAdapter(agent, token=TOKEN).app()
    with running_server(app) as url:
        done = run_pytest(tmp_path, "--evalport-target", url, env={"EVALPORT_TOKEN": TOKEN})
    output = done.stdout + done.stderr
    assert "2 failed, 2 passed in" in output, output
    assert (
        "contains('delivered'): 'Order A1049 is shipped with DHL.' lacks 'delivered'" in output
        and "FAILED test_agent_evals.py::test_wrong_expectation_fails" in output
    )
    assert "FAILED test_agent_evals.py::test_verify_inside_the_test" in output
    assert "not reached" not in output


def test_without_a_target_the_eval_tests_fail_naming_the_settings(tmp_path):
    done = run_pytest(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "4 errors" in done.stdout, done.stdout + done.stderr  # at setup: not one skip
    assert (
        "evalport: no target: set target (a URL) or local (module:attr) under "
        "[tool.evalport] in pyproject.toml, or pass --evalport-target URL or "
        "--evalport-local module:attr"
    ) in done.stdout


def test_the_target_comes_from_tool_evalport_as_evalport_init_writes_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.evalport]\nlocal = "{(ROOT / "examples" / "support_agent.py").as_posix()}:agent"\n'
    )
    done = run_pytest(tmp_path)
    output = done.stdout + done.stderr
    assert "2 failed, 2 passed in" in output, output  # as against the served agent
    assert "FAILED test_agent_evals.py::test_wrong_expectation_fails" in output
    ini = run_pytest(tmp_path, "-o", "evalport_target=http://127.0.0.1:1")  # the ini key wins
    assert "127.0.0.1:1" in ini.stdout + ini.stderr and "2 passed" not in ini.stdout


JUDGED = """
async def test_helpful(evalport):
    await evalport.send("hello")
    evalport.judge().helpfulness().gate().at_least(0.8)
"""


@pytest.mark.e2e
def test_the_judge_comes_from_pyproject(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "client" / "judges"))
    from judge_fake_server import FakeChatServer, verdict

    chat = FakeChatServer()
    chat.reset(verdict(0.5, "vague"))
    (tmp_path / "test_judged.py").write_text(textwrap.dedent(JUDGED))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    with running_server(chat.app) as url:
        (tmp_path / "pyproject.toml").write_text(
            f'[tool.evalport.judge]\nmodel = "fake-judge"\nbase-url = "{url}/v1"\n'
            'api-key-env = "FAKE_JUDGE_KEY"\n'
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--evalport-local",
                f"{ROOT / 'examples' / 'support_agent.py'}:agent",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "FAKE_JUDGE_KEY": "k-0123456789"},
        )
    output = done.stdout + done.stderr
    assert len(chat.requests) == 1, output
    assert "1 failed in" in output and "1 error" not in output, output  # the test fails
    assert "helpfulness" in output and "(score 0.50)" in output


def test_every_option_and_ini_key_of_the_plugin_is_in_the_docs():
    from evalport.client.cli import _pytest_plugin

    names: list[str] = []

    class Collect:
        def getgroup(self, *args, **kwargs):
            return self

        def addoption(self, name, **kwargs):
            names.append(name)

        def addini(self, name, *args, **kwargs):
            names.append(name)

    _pytest_plugin.pytest_addoption(Collect())
    page = (ROOT / "docs" / "ci.md").read_text()
    assert len(names) == 6
    assert [name for name in names if f"`{name}" not in page] == []
