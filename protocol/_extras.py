"""Optional parts: import them lazily and say how to install what is missing.

Rules:

- A part of evalport that needs an extra (``server``, ``client``, ``redis``...) is imported
  only when it is used; a missing dependency is a :class:`MissingExtraError` whose message
  ends with the ``pip install 'evalport[extra]'`` line to run.
- The upper packages plug into the lower ones through entry points of the distribution,
  never by name: ``evalport.commands`` (one per ``evalport`` subcommand) and
  ``evalport.pytest`` (pytest plugins), each naming a module in ``pyproject.toml``. The
  extra a plugin needs is the name of its package, the second part of its dotted name
  (a module of the client package needs ``evalport[client]``). This package reads the groups and names no upper package.
"""

from __future__ import annotations

import importlib
import re
from importlib.metadata import (
    EntryPoint,
    PackageNotFoundError,
    distribution,
    entry_points,
    requires,
)
from types import ModuleType


class MissingExtraError(ImportError):
    """A part of evalport was used without the extra that provides its dependencies."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or fail with the ``pip install 'evalport[extra]'`` to run."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"{purpose} needs {module.split('.')[0]!r}, which is not installed. "
            f"Run: pip install 'evalport[{extra}]'"
        ) from error


def plugins(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name (``evalport.commands``, ``evalport.pytest``)."""
    return {point.name: point for point in entry_points(group=group)}


def load_plugin(point: EntryPoint, purpose: str) -> ModuleType:
    """Import the module an entry point names, or fail with the extra it needs.

    Only a missing third-party module becomes :class:`MissingExtraError`; an import error
    inside evalport itself is a bug and propagates as it is.
    """
    try:
        module: ModuleType = importlib.import_module(point.module)
    except MissingExtraError:
        raise
    except ImportError as error:
        if (error.name or "evalport").partition(".")[0] == "evalport":
            raise
        raise MissingExtraError(
            f"{purpose} needs {error.name!r}, which is not installed. "
            f"Run: pip install 'evalport[{extra_of(point)}]'"
        ) from error
    return module


def extra_of(point: EntryPoint) -> str:
    """The extra a plugin needs: its package's name (the second part of its dotted name)."""
    return point.module.split(".")[1]


def extra_installed(extra: str) -> bool:
    """Whether every distribution the ``evalport[extra]`` extra asks for is installed."""
    for requirement in requires("evalport") or []:
        name, _, marker = requirement.partition(";")
        if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", marker):
            try:
                distribution(re.split(r"[\s\[<>=!~]", name.strip(), maxsplit=1)[0])
            except PackageNotFoundError:
                return False
    return True
