"""Fresh virtual environments holding the built wheel and only the dependencies a test names.

- :func:`build_wheel` builds the wheel offline (no build isolation, no index) from a copy of
  the sources; the build's verbose output is kept beside it, in ``build.log``.
- :func:`make_venv` creates a bare venv (no pip), installs the wheel ``--no-deps`` with this
  interpreter's pip, and makes exactly ``deps`` and their requirement closure importable:
  a ``.pth`` file points at a folder of links to the already installed distributions
  (their dist-info included, so their entry points, such as pytest plugins, are seen).
  Nothing is downloaded; a venv takes a few seconds.
- :func:`clean_env` is the environment to run such a venv's python in (no ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PIP = (sys.executable, "-m", "pip", "-q", "--disable-pip-version-check")


def _closure(names: list[str]) -> set[str]:
    """The installed distributions ``names`` need, transitively (markers honoured)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for line in metadata.requires(name) or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def _link_site(target: Path, names: list[str]) -> Path:
    """A folder holding links to exactly the top-level files of ``names``' closure."""
    target.mkdir()
    for name in _closure(names):
        dist = metadata.distribution(name)
        for file in dist.files or ():
            top = file.parts[0]
            source = Path(dist.locate_file(top))
            link = target / top
            if top.endswith(".pth") or link.exists() or not source.exists():
                continue
            if top == "..":  # console scripts live in bin/, outside site-packages
                continue
            link.symlink_to(source)
    return target


def build_wheel(work: Path) -> Path:
    """The wheel of the current sources, built offline into ``work``."""
    source = work / "src"
    source.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("protocol", "server", "client"):
        shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
    for file in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / file, source / file)
    out = work / "dist"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "-v",
            "--disable-pip-version-check",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (work / "build.log").write_text(done.stdout + done.stderr)
    (built,) = out.glob("evalport-*.whl")
    return built


def make_venv(tmp: Path, wheel: Path, deps: list[str]) -> Path:
    """A fresh venv with the wheel installed and only ``deps`` importable; its python."""
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [*PIP, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "_deps.pth").write_text(str(_link_site(tmp / "deps", deps)) + "\n")
    return python


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without ``PYTHONPATH``, plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(extra)
    return env
