"""What evalport offers, derived from the code: the documentation tests compare it with the pages.

- :func:`extras`: the extras of ``pyproject.toml``.
- :func:`command_parsers`: one ``argparse`` parser per ``evalport`` command, built the way
  ``evalport`` builds it (the command module's ``add_arguments``); :func:`cli_options`
  their long options, with the pytest plugin's.
- :func:`faces`: the public packages and their ``__all__``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import tomllib
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

__all__ = ["FACES", "cli_options", "command_parsers", "extras", "faces"]

ROOT = Path(__file__).resolve().parents[2]
FACES = (
    "evalport.protocol",
    "evalport.protocol.runtime",
    "evalport.server",
    "evalport.server.stores",
    "evalport.server.adapters",
    "evalport.client",
    "evalport.client.assertions",
    "evalport.client.judges",
    "evalport.client.reports",
    "evalport.client.cli",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise AssertionError(f"{self.prog}: {message}")


@cache
def extras() -> frozenset[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return frozenset(project["optional-dependencies"])


@cache
def command_parsers() -> dict[str, argparse.ArgumentParser]:
    parsers = {}
    for point in entry_points(group="evalport.commands"):
        module = importlib.import_module(point.module)
        parser = _Parser(prog=f"evalport {point.name}")
        module.add_arguments(parser)
        parsers[point.name] = parser
    return parsers


def _help(*words: str) -> str:
    """What ``evalport WORDS --help`` prints."""
    from evalport.protocol._cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.suppress(SystemExit):
        main([*words, "--help"])
    return printed.getvalue()


def _options(*words: str) -> set[str]:
    text = _help(*words)
    found = set(re.findall(r"^ +(?:-\w(?: \S+)?, )?(--[a-z][\w-]*)", text, re.M)) - {"--help"}
    # argparse lists a subcommand indented by four, alone or followed by its help
    for sub in re.findall(r"^    ([a-z][\w-]*)(?: {2,}\S.*)?$", text, re.M):
        found |= _options(*words, sub)
    return found


@cache
def cli_options() -> dict[str, set[str]]:
    """Long options by command; ``pytest`` holds the plugin's, ``evalport`` the top level's."""
    options = {name: _options(name) for name in command_parsers()}
    plugin = (ROOT / "client" / "cli" / "_pytest_plugin.py").read_text(encoding="utf-8")
    options["pytest"] = set(re.findall(r"addoption\(\s*\"(--[\w-]+)\"", plugin))
    options["evalport"] = {"--version"}
    return options


def faces() -> dict[str, list[str]]:
    return {face: list(importlib.import_module(face).__all__) for face in FACES}
