"""The distribution as users get it: a wheel installed into fresh virtual environments.

The wheel is built offline (no build isolation) from a copy of the sources, then installed
``--no-deps`` into bare venvs (``support/venvs.py``). Each venv sees only the dependencies
of one extra: instead of downloading them, the already installed distributions (and their
requirement closure) are linked from this interpreter's site-packages.

- ``server`` venv: msgspec + starlette, no httpx. ``evalport.server`` imports; importing
  ``evalport.client`` names ``pip install 'evalport[client]'``.
- ``client`` venv: msgspec + httpx + pyyaml + jsonschema, no starlette. The mirror image.
- Both: ``evalport.protocol`` imports, the ``evalport`` console script runs, and nothing is
  installed as a top-level ``protocol``, ``server`` or ``client`` module.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest
from support.venvs import ROOT, build_wheel, clean_env, make_venv


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def _run(python: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    return subprocess.run(
        [str(python), "-I", "-c", code], capture_output=True, text=True, env=env, cwd="/"
    )


def test_the_build_warns_of_nothing_deprecated(wheel: Path) -> None:
    log = (wheel.parents[1] / "build.log").read_text()
    assert "running bdist_wheel" in log  # the backend's own output is there
    assert "DeprecationWarning" not in log, log


def test_wheel_holds_only_the_evalport_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"evalport", "evalport-0.1.0.dist-info"}
    for part in ("protocol", "server", "client"):
        assert f"evalport/{part}/py.typed" in names
    # Every module of the source tree is in the wheel (a package folder missing from
    # pyproject's [tool.setuptools] packages would silently be left out).
    for part in ("protocol", "server", "client"):
        for module in sorted((ROOT / part).rglob("*.py")):
            if "__pycache__" in module.parts:
                continue
            inside = f"evalport/{module.relative_to(ROOT).as_posix()}"
            assert inside in names, (
                f"{inside} is not in the wheel: add its package to [tool.setuptools] packages"
            )
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert (
        "evalport = evalport.protocol._cli:main"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )
    metadata_text = (
        zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    )
    base = [
        line
        for line in metadata_text.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert [line.split()[1].split(">")[0] for line in base] == ["msgspec"]
    for extra in ("server", "client", "all", "dev"):
        assert f"Provides-Extra: {extra}" in metadata_text
    client = [line for line in metadata_text.splitlines() if 'extra == "client"' in line]
    assert any(line.startswith("Requires-Dist: jsonschema") for line in client), client


def test_server_extra_venv(wheel: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path, wheel, ["msgspec", "starlette"])
    done = _run(
        python,
        "import importlib.util as u, evalport.protocol as p, evalport.server\n"
        "assert u.find_spec('httpx') is None, 'httpx leaked into the server venv'\n"
        "for name in ('protocol', 'server', 'client'):\n"
        "    assert u.find_spec(name) is None, name\n"
        "print(p.__version__, p.PROTOCOL_VERSION)\n"
        "try:\n"
        "    import evalport.client\n"
        "except ImportError as e:\n"
        "    print('ERR', e)\n",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "0.1.0 1"
    assert lines[1].startswith("ERR ") and "pip install 'evalport[client]'" in lines[1]
    script = python.parent / "evalport"
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "evalport 0.1.0 (protocol 1)"


def test_client_extra_venv(wheel: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path, wheel, ["msgspec", "httpx", "httpx-sse", "pyyaml", "jsonschema"])
    done = _run(
        python,
        "import importlib.util as u, evalport.protocol, evalport.client\n"
        "from evalport.client.assertions import MatchesJsonSchema\n"
        "MatchesJsonSchema({'type': 'object'})\n"
        "assert u.find_spec('starlette') is None, 'starlette leaked into the client venv'\n"
        "try:\n"
        "    import evalport.server\n"
        "except ImportError as e:\n"
        "    print('ERR', e)\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ERR ")
    assert "pip install 'evalport[server]'" in done.stdout
    serve = subprocess.run(
        [str(python.parent / "evalport"), "serve"], capture_output=True, text=True
    )
    assert serve.returncode == 2
    assert "pip install 'evalport[server]'" in serve.stderr


def test_pytest_runs_in_a_server_only_install(wheel: Path, tmp_path: Path) -> None:
    """The pytest11 entry point must not break a service's own test suite."""
    python = make_venv(tmp_path, wheel, ["msgspec", "starlette", "pytest"])
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_service.py").write_text("def test_ok():\n    assert True\n")
    env = clean_env()
    done = subprocess.run(
        [str(python), "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
        capture_output=True,
        text=True,
        env=env,
        cwd=suite,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert (
        "evalport-target"
        not in subprocess.run(
            [str(python), "-I", "-m", "pytest", "--help"], capture_output=True, text=True, env=env
        ).stdout
    )


def test_pytest_plugin_loads_with_the_client(wheel: Path, tmp_path: Path) -> None:
    python = make_venv(
        tmp_path, wheel, ["msgspec", "httpx", "httpx-sse", "pyyaml", "jsonschema", "pytest"]
    )
    env = clean_env()
    done = subprocess.run(
        [str(python), "-I", "-m", "pytest", "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "--evalport-target" in done.stdout


def test_a_base_install_names_the_missing_module(wheel: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path, wheel, ["msgspec"])
    for command, module, extra in (("serve", "starlette", "server"), ("run", "httpx", "client")):
        done = subprocess.run(
            [str(python.parent / "evalport"), command],
            capture_output=True,
            text=True,
            env=clean_env(),
        )
        assert done.returncode == 2, done.stderr
        assert f"needs {module!r}, which is not installed." in done.stderr, done.stderr
        assert f"Run: pip install 'evalport[{extra}]'" in done.stderr


HEALTH = """
import asyncio, json
from evalport.server import EvalAdapter

async def agent(message, history, ctx):
    return message

async def health():
    app = EvalAdapter(agent, token=None).app()
    sent = []
    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}
    async def send(message):
        sent.append(message)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": "/health", "raw_path": b"/health",
             "root_path": "", "query_string": b"", "headers": [],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    print(json.loads(body)["evalportVersion"])

asyncio.run(health())
"""


def test_one_version_everywhere(wheel: Path, tmp_path: Path) -> None:
    """pyproject, the wheel, `evalport --version`, /health and the CHANGELOG's newest release."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert wheel.name.startswith(f"evalport-{version}-")
    python = make_venv(tmp_path, wheel, ["msgspec", "starlette"])
    script = python.parent / "evalport"
    printed = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert printed.stdout.strip() == f"evalport {version} (protocol 1)", printed.stderr
    health = _run(python, HEALTH)
    assert health.returncode == 0, health.stderr
    assert health.stdout.strip() == version
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d\d-\d\d$", changelog, re.M)
    assert releases and releases[0] == version, f"the newest CHANGELOG release is {releases[:1]}"
