"""Optional dependencies: import them lazily and say how to install what is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtraError", "require"]


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
