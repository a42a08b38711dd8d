"""The project's own code that ``evalport run`` loads besides its eval files: ``bootstrap``
(imported once, before discovery) and ``factory`` (builds evaluators and reporters).
See ARCHITECTURE.md, "evalport run".
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._core import ConfigError
from ._targets import load_object

CONFIG_BOOTSTRAP = "[tool.evalport] bootstrap"
Factory = Callable[[type], Any]
"""``factory(cls) -> instance``: builds an evaluator or a reporter from its class."""


def run_bootstrap(spec: str, named: str = CONFIG_BOOTSTRAP) -> None:
    """Import the bootstrap module or file ``spec`` (see ARCHITECTURE.md, "evalport run")."""
    try:
        if spec.endswith(".py") or "/" in spec:
            path = Path(spec).resolve()
            if not path.is_file():
                raise FileNotFoundError(f"no such file: {spec}")
            name = f"_evalport_bootstrap_{path.stem}"
            if name in sys.modules:
                return
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"cannot import {spec}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())  # a module from the folder run in, as --local
            importlib.import_module(spec)
    except Exception as error:
        raise ConfigError(f"{named} {spec!r}: {type(error).__name__}: {error}") from None


def load_factory(spec: str, named: str = "[tool.evalport] factory") -> Factory:
    """The factory callable ``spec`` names (``module:attr``)."""
    factory = load_object(spec, named)
    if not callable(factory):
        raise ConfigError(f"{named} {spec!r}: not callable; name a function factory(cls)")
    built: Factory = factory
    return built
