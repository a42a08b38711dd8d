"""Optional parts: import them lazily and say how to install what is missing.

Only a module that is not installed is a missing extra; any other import error is a bug
and propagates. Rules: see ARCHITECTURE.md, "Shared below the server and the client".
"""

from __future__ import annotations

import importlib
import importlib.util
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


def missing_module(error: ImportError) -> str | None:
    """The top-level module ``error`` says is not installed, or ``None`` for any other error.

    ``None`` means a bug, not a missing extra: the error is not a missing module, or the
    module is evalport's own, or it is installed (what failed is inside it).
    """
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    top = error.name.partition(".")[0]
    if top == "evalport" or importlib.util.find_spec(top) is not None:
        return None
    return top


def _missing_extra(purpose: str, missing: str, extra: str) -> MissingExtraError:
    return MissingExtraError(
        f"{purpose} needs {missing!r}, which is not installed. Run: pip install 'evalport[{extra}]'"
    )


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or fail with the missing module and the ``pip install`` to run."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        missing = missing_module(error)
        if missing is None:
            raise
        raise _missing_extra(purpose, missing, extra) from error


def plugins(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name (``evalport.commands``, ``evalport.pytest``)."""
    return {point.name: point for point in entry_points(group=group)}


def load_plugin(point: EntryPoint, purpose: str) -> ModuleType:
    """Import the module an entry point names, or fail with the extra it needs."""
    try:
        module: ModuleType = importlib.import_module(point.module)
    except MissingExtraError:
        raise
    except ImportError as error:
        missing = missing_module(error)
        if missing is None:
            raise
        raise _missing_extra(purpose, missing, extra_of(point)) from error
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
