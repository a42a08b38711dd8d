"""The pytest plugin in fresh installs: ``evalport[client]`` and pytest alone, then beside
pytest-asyncio in strict and in auto mode. Each runs the same eval tests against the
example agent (``--evalport-local``) with warnings as errors; a venv takes seconds
(``support/venvs.py`` links the installed dependencies instead of downloading them)."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from support.venvs import ROOT, build_wheel, clean_env, make_venv

pytestmark = pytest.mark.venv

AGENT = f"{ROOT / 'examples' / 'support_agent.py'}:agent"
LOCAL = ["--evalport-local", AGENT]
CLIENT = ["msgspec", "httpx", "httpx-sse", "pyyaml", "jsonschema", "pytest"]

SUITE = """
import asyncio

import pytest


async def test_status(evalport):
    await evalport.send("Where is my order A1049?")
    evalport.contains("shipped")
    evalport.called_tool("order_status", {"order_id": "A1049"})


async def test_wrong_expectation_fails(evalport):
    await evalport.send("Where is my order A1049?")
    evalport.contains("delivered")


async def test_the_target_alone(evalport_target):
    session = await evalport_target.open(case_id="alone")
    try:
        await session.send("Where is my order A1049?")
        assert "shipped" in str(session.run)
    finally:
        await session.close()


@pytest.mark.evalport(strict=True)
async def test_verify_inside_the_test(evalport):
    await evalport.send("hello")
    evalport.contains("nothing like this").soft()
    await evalport.verify()
    raise AssertionError("not reached: verify failed the test")
"""

MARKED = """
import pytest_asyncio


@pytest_asyncio.fixture
async def fixture_loop():
    return asyncio.get_running_loop()


@pytest.mark.asyncio
async def test_on_the_loop_of_pytest_asyncio(evalport, fixture_loop):
    assert asyncio.get_running_loop() is fixture_loop
    await evalport.send("Where is my order A1049?")
    evalport.contains("shipped")
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def run_suite(python: Path, folder: Path, suite: str, ini: str) -> str:
    folder.mkdir()
    (folder / "test_agent_evals.py").write_text(textwrap.dedent(suite))
    (folder / "pytest.ini").write_text(f"[pytest]\nfilterwarnings = error\n{ini}")
    done = subprocess.run(
        [str(python), "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", *LOCAL],
        cwd=folder,
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    return done.stdout + done.stderr


def assert_outcomes(output: str, passed: int) -> None:
    assert f"2 failed, {passed} passed in" in output, output
    assert "contains('delivered'): 'Order A1049 is shipped with DHL.' lacks 'delivered'" in (output)
    assert "FAILED test_agent_evals.py::test_verify_inside_the_test" in output
    assert "not reached" not in output and "warning" not in output.lower(), output


def test_the_client_extra_and_pytest_alone(wheel: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path, wheel, CLIENT)
    absent = subprocess.run([str(python), "-I", "-c", "import pytest_asyncio"], env=clean_env())
    assert absent.returncode != 0
    output = run_suite(python, tmp_path / "suite", SUITE, "")
    assert_outcomes(output, passed=2)


def test_beside_pytest_asyncio_in_strict_and_auto_mode(wheel: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path, wheel, [*CLIENT, "pytest-asyncio"])
    for mode in ("strict", "auto"):
        output = run_suite(
            python,
            tmp_path / mode,
            SUITE + MARKED,
            f"asyncio_mode = {mode}\nasyncio_default_fixture_loop_scope = function\n",
        )
        assert_outcomes(output, passed=3)
