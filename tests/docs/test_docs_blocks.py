"""Every code block of the README and of every page of the site runs here or in its topic's test.

- A block inside ``<!-- section:NAME -->`` markers is run by the test of that topic
  (``SECTIONS`` names it, with the blocks it runs per language). A block added to a
  section without a test for it changes the count and fails here.
- Every other block runs here, by language:
  ``python`` blocks whose first line is ``# some/file.py`` are files, written into a work
  folder; the page's other Python blocks run in order in one namespace, from that folder,
  with ``examples/`` importable, and a ``print(...)  # text`` line must print ``text``.
  ``console`` blocks are commands (``$ ...``) followed by their output, run for real
  against a served agent, and compared line by line (``...`` stands for anything).
  ``bash`` blocks are commands run for real and expected to succeed, except ``pip
  install`` lines (they must name real extras: this machine installs nothing) and
  ``make`` lines (they must name a target of the Makefile), and benchmark lines (the
  script must exist and compile: a benchmark takes minutes and never gates a build).
  ``yaml``, ``toml`` and ``json`` blocks must parse, and an ``evalport`` command in a
  workflow must parse with that command's options.
- A block in a language with no runner fails here.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support.docs import DOCS, ROOT, blocks, pages
from support.servers import free_port, wait_for_http
from support.surface import command_parsers, extras

SECTION = re.compile(r"<!-- section:([\w-]+) -->(.*?)<!-- /section:\1 -->", re.S)
EVALPORT = str(Path(sys.executable).parent / "evalport")
PORT = "8765"  # the port the pages use; each test serves on a free one instead

# section -> (the test that runs its blocks, how many blocks of each language it runs)
SECTIONS: dict[str, tuple[str, dict[str, int]]] = {
    "protocol": ("tests/protocol/test_readme_protocol.py", {"python": 1}),
    # the server section's async-factory block runs in tests/server/adapters/test_serve_targets.py
    "server": ("tests/server/test_readme_server.py", {"python": 5, "bash": 1}),
    "approvals": ("tests/server/test_readme_server.py", {"python": 2}),
    "replicas": (
        "tests/server/replicas/test_readme_replicas.py",
        {"python": 1, "bash": 1, "text": 1},
    ),
    "adapters": ("tests/server/adapters/test_adapters_readme_examples.py", {"python": 7}),
    "client": ("tests/client/targets/test_readme_client.py", {"python": 4}),
    "assertions": ("tests/client/cases/test_readme_assertions.py", {"python": 5}),
    "judges": ("tests/client/judges/test_judge_readme.py", {"python": 4, "json": 1, "bash": 1}),
    "runner": (
        "tests/client/cli/test_readme_runner.py",
        {"python": 3, "bash": 2, "toml": 1, "yaml": 1},
    ),
    "benchmarks": ("tests/docs/test_docs_pages.py", {}),
    "a2a": ("tests/client/targets/a2a/test_a2a_cli.py", {"python": 1, "bash": 1}),
    "porting": ("tests/client/cases/test_seed_ports.py", {"python": 3}),
    "agui": ("tests/client/targets/agui/test_agui_docs.py", {"python": 1, "bash": 1}),
}


def outside_sections(text: str) -> list[tuple[str, str]]:
    return blocks(SECTION.sub("", text))


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_section_is_run_by_its_test() -> None:
    found: dict[str, Counter[str]] = {}
    for page in pages():
        for name, body in SECTION.findall(page.read_text(encoding="utf-8")):
            assert name not in found, f"section {name!r} appears twice"
            found[name] = Counter(language for language, _ in blocks(body))
    assert set(found) == set(SECTIONS), "sections without a test, or tests without a section"
    for name, (test, languages) in SECTIONS.items():
        source = (ROOT / test).read_text(encoding="utf-8")
        assert name in source, f"{test} does not read the {name!r} section"
        assert dict(found[name]) == languages, (
            f"section {name!r} has blocks {dict(found[name])}, its test runs {languages}: "
            f"run the new block in {test}, then update SECTIONS here"
        )


RUNNERS = {"python", "console", "bash", "yaml", "toml", "json"}


def test_every_block_outside_sections_has_a_runner() -> None:
    for page in pages():
        for language, _ in outside_sections(page.read_text(encoding="utf-8")):
            assert language in RUNNERS, f"{page_id(page)}: no runner for a {language!r} block"


# -- the runners --------------------------------------------------------------------------------


def is_file(code: str) -> str | None:
    first = code.splitlines()[0]
    match = re.fullmatch(r"# ([\w./-]+\.py)", first)
    return match.group(1) if match else None


def expected_prints(code: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\s*print\(.*\)  # (.*)$", code, re.M)]


def matches(expected: str, actual: str) -> bool:
    pattern = re.escape(expected).replace(re.escape("..."), ".*")
    return re.fullmatch(pattern, actual) is not None


def check_pip(line: str) -> None:
    words = shlex.split(line.split("#")[0])
    assert words[:2] == ["pip", "install"], line
    for word in words[2:]:
        if word == "-e":  # an editable install of the clone: .[extras]
            continue
        match = re.fullmatch(r"(?:evalport|\.)\[([\w,-]+)\]", word)
        assert match, f"{line}: installs something other than an evalport extra"
        for extra in match.group(1).split(","):
            assert extra in extras(), f"{line}: evalport has no extra {extra!r}"


def check_make(line: str) -> None:
    target = shlex.split(line.split("#")[0])[1]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"no make target {target!r}"


def check_evalport_command(command: str) -> None:
    words = shlex.split(command.replace("\\\n", " "))
    assert words[0] == "evalport", command
    parsers = command_parsers()
    assert words[1] in parsers, f"{command}: no command {words[1]!r}"
    parsers[words[1]].parse_args(words[2:])  # exits (fails the test) on an unknown option


class Shell:
    """Runs a page's commands in a work folder, with servers in the background."""

    def __init__(self, folder: Path, port: int) -> None:
        self.folder = folder
        self.port = str(port)
        self.env = {
            **os.environ,
            "PATH": f"{Path(EVALPORT).parent}{os.pathsep}{os.environ['PATH']}",
        }
        self.env.pop("EVALPORT_TOKEN", None)
        self.servers: list[tuple[subprocess.Popen[bytes], Path]] = []

    def local(self, command: str) -> str:
        return command.replace(PORT, self.port)

    def run(self, command: str) -> tuple[int, list[str]]:
        """Run one command line; returns its exit code and output lines."""
        command = self.local(command.split("  #")[0].strip())
        if command.startswith("pip install"):
            check_pip(command)
            return 0, []
        if command.startswith("make "):
            check_make(command)
            return 0, []
        if command.startswith(".venv/bin/python benchmarks/"):
            script = ROOT / shlex.split(command)[1]
            compile(script.read_text(encoding="utf-8"), str(script), "exec")
            return 0, []
        if command.startswith("export "):
            name, _, value = command.removeprefix("export ").partition("=")
            self.env[name] = value
            return 0, []
        if command.endswith("&") or command.startswith("evalport serve"):
            return 0, self.serve(command.rstrip("&").strip())
        done = subprocess.run(
            self.argv(command),
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.returncode, (done.stdout + done.stderr).splitlines()

    def argv(self, command: str) -> list[str]:
        """The command's words; a tool this venv has as a module but not as a script
        (``uvicorn`` when it comes from the shared venv) runs as ``python -m``."""
        words = shlex.split(command)
        if shutil.which(words[0], path=self.env["PATH"]) is None:
            return [sys.executable, "-m", *words]
        return words

    def serve(self, command: str) -> list[str]:
        log = self.folder / f"server-{len(self.servers)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                self.argv(command), cwd=self.folder, env=self.env, stdout=out, stderr=out
            )
        self.servers.append((process, log))
        wait_for_http(f"http://127.0.0.1:{self.port}/health", timeout=60)
        return [line for line in log.read_text().splitlines() if not line.startswith("INFO")]

    def stop(self) -> None:
        for process, _ in self.servers:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:  # pragma: no cover - reported by the test
                process.kill()
                process.wait()


@contextlib.contextmanager
def shell(folder: Path) -> Iterator[Shell]:
    (folder / "examples").symlink_to(ROOT / "examples")
    runner = Shell(folder, free_port())
    try:
        yield runner
    finally:
        runner.stop()


def run_console(runner: Shell, code: str, where: str) -> None:
    """``$ command`` lines, each followed by the output it must print."""
    steps: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"{where}: output before any command"
            steps[-1][1].append(runner.local(line))
    for command, expected in steps:
        code_, output = runner.run(command)
        assert code_ == 0, f"{where}: {command} exited {code_}:\n" + "\n".join(output)
        assert len(output) >= len(expected), f"{where}: {command} printed {output}"
        if not command.startswith("evalport serve"):
            assert len(output) == len(expected), f"{where}: {command} printed {output}"
        for want, got in zip(expected, output, strict=False):
            assert matches(want, got), f"{where}: {command}\n  expected: {want}\n  printed:  {got}"


def run_bash(runner: Shell, code: str, where: str) -> None:
    for command in code.replace("\\\n", " ").splitlines():
        if command.strip() and not command.startswith("#"):
            exit_code, output = runner.run(command)
            assert exit_code == 0, f"{where}: {command} exited {exit_code}:\n" + "\n".join(output)


def run_python(code: str, namespace: dict[str, object], where: str) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), namespace)
    lines = printed.getvalue().splitlines()
    expected = expected_prints(code)
    assert len(lines) == len(expected), f"{where}: printed {lines}, the page says {expected}"
    for want, got in zip(expected, lines, strict=True):
        assert matches(want, got), f"{where}: expected {want!r}, printed {got!r}"


def check_data(language: str, code: str, where: str) -> None:
    if language == "json":
        import json

        for line in code.splitlines():
            json.loads(line)
    elif language == "toml":
        tomllib.loads(code)
    else:
        document = yaml.safe_load(code)
        for job in document.get("jobs", {}).values():
            for step in job.get("steps", []):
                command = str(step.get("run", "")).strip().rstrip("&").strip()
                if command.startswith("evalport "):
                    check_evalport_command(command)
                elif command.startswith("pip install"):
                    check_pip(command)


@pytest.fixture
def examples_on_path() -> Iterator[None]:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        yield
    finally:
        sys.path.remove(str(ROOT / "examples"))


OUTSIDE = [
    page
    for page in pages()
    if outside_sections(page.read_text(encoding="utf-8")) and page.name not in ("get-started.md",)
]


@pytest.mark.e2e
@pytest.mark.parametrize("page", OUTSIDE, ids=page_id)
def test_the_blocks_of_the_page_run(
    page: Path, tmp_path: Path, examples_on_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    page_blocks = outside_sections(page.read_text(encoding="utf-8"))
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for language, code in page_blocks:
        if language == "python" and (path := is_file(code)):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(code, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        with shell(tmp_path) as runner:
            runner.env["PYTHONPATH"] = str(tmp_path)
            for index, (language, code) in enumerate(page_blocks):
                where = f"{page_id(page)} block {index + 1}"
                if language == "python":
                    if not is_file(code):
                        run_python(code, namespace, where)
                elif language == "console":
                    run_console(runner, code, where)
                elif language == "bash":
                    run_bash(runner, code, where)
                else:
                    check_data(language, code, where)
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.e2e
def test_get_started_step_by_step(tmp_path: Path) -> None:
    """The Get started page, every command against a served example agent, in order."""
    page = DOCS / "get-started.md"
    page_blocks = outside_sections(page.read_text(encoding="utf-8"))
    for language, code in page_blocks:
        if language == "python":
            path = is_file(code)
            assert path, "the Get started page's Python blocks are files to save"
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(code, encoding="utf-8")
    with shell(tmp_path) as runner:
        for index, (language, code) in enumerate(page_blocks):
            where = f"get-started.md block {index + 1}"
            if language == "console":
                run_console(runner, code, where)
            elif language != "python":
                check_data(language, code, where)
        assert (tmp_path / "report.html").is_file(), "step 5 writes report.html"
        # step 7: the same eval with the wrong expectation fails, with exit code 1
        eval_file = tmp_path / "evals" / "first_eval.py"
        eval_file.write_text(eval_file.read_text().replace('"shipped"', '"delivered"'))
        code_, output = runner.run("evalport run evals --local examples/support_agent.py:agent")
        assert code_ == 1 and any("FAIL" in line for line in output), output
