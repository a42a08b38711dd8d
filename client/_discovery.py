"""Discovery: find eval files under a folder, import them, collect their cases under ids
stable across machines and runs. A file that fails to load never stops the others. See
ARCHITECTURE.md, "Discovery and evaluators".
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib.util
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._core import Case, cases_from, find_pyproject, spec_of
from ._evaluator import Evaluator, evaluator_cases

EVAL_FILE_PATTERNS: Final = ("*_eval.py", "eval_*.py")
_SKIP_DIRS: Final = frozenset(("node_modules", "venv", "site-packages", "build", "dist"))
_NOT_IDENTIFIER = re.compile(r"\W")


class DuplicateCaseError(ValueError):
    """Two cases share an id."""


@dataclass(frozen=True, slots=True)
class LoadError:
    """An eval file that could not be loaded."""

    path: str
    error: str
    error_type: str
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.error_type}: {self.error}"


def _searchable(folder: Path) -> bool:
    name = folder.name
    return not (name.startswith((".", "_")) or name in _SKIP_DIRS)


def eval_files(root: Path) -> list[Path]:
    """The eval files under ``root`` (or ``root`` itself when it is one), sorted."""
    if root.is_file():
        return [root]
    found: list[Path] = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if not all(_searchable(Path(part)) for part in relative.parts[:-1]):
            continue
        if any(fnmatch.fnmatch(path.name, pattern) for pattern in EVAL_FILE_PATTERNS):
            found.append(path)
    return found


def _import(path: Path, module_name: str, root: Path) -> object:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    folders = list(dict.fromkeys((str(path.parent), str(root))))
    sys.modules[module_name] = module
    sys.path[:0] = folders
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    finally:
        for folder in folders:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
    return module


def _cases_in(module: object, prefix: str, factory: Callable[[type], Any] | None) -> list[Case]:
    name = getattr(module, "__name__", "")
    cases: list[Case] = []
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) != name:
            continue
        if isinstance(value, type) and issubclass(value, Evaluator) and value is not Evaluator:
            if not getattr(value, "__abstractmethods__", None):
                cases.extend(evaluator_cases(value, prefix=prefix, factory=factory))
        elif callable(value) and spec_of(value) is not None:
            cases.extend(cases_from(value, prefix=prefix))
    return cases


def _shown(file: Path, pyproject: Path | None) -> str:
    """``file`` relative to the project (the nearest ``pyproject.toml``'s folder) when it
    is inside it, else as found."""
    if pyproject is not None:
        with contextlib.suppress(ValueError):
            return file.resolve().relative_to(pyproject.parent.resolve()).as_posix()
    return str(file)


def discover(
    path: str | Path, *, factory: Callable[[type], Any] | None = None
) -> tuple[list[Case], list[LoadError]]:
    """Every case under ``path``, and the files that failed to load (see ARCHITECTURE.md,
    "Discovery and evaluators").
    ``factory(cls)`` builds each evaluator class found (default: ``cls()``)."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no such file or folder: {root}")
    base = root.parent if root.is_file() else root
    project = find_pyproject(base)
    cases: list[Case] = []
    errors: list[LoadError] = []
    seen: dict[str, Case] = {}
    for file in eval_files(root):
        relative = file.relative_to(base).with_suffix("").as_posix()
        module_name = "evalport_evals." + _NOT_IDENTIFIER.sub("_", relative)
        try:
            module = _import(file, module_name, base)
            found = _cases_in(module, prefix=f"{relative}::", factory=factory)
        except Exception as error:
            errors.append(
                LoadError(
                    path=_shown(file, project),
                    error=str(error) or repr(error),
                    error_type=type(error).__name__,
                    traceback=traceback.format_exc(),
                )
            )
            continue
        for case in found:
            if case.id in seen:
                raise DuplicateCaseError(
                    f"duplicate case id {case.id!r}: defined at {seen[case.id].source} "
                    f"and at {case.source}"
                )
            seen[case.id] = case
            cases.append(case)
    return cases, errors
