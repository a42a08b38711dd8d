"""Load an object named on the command line as ``module:attr`` or ``path/to/file.py:attr``.

Shared by ``evalport serve TARGET`` and ``evalport run --local TARGET``. A path (it ends in
``.py`` or holds a slash) is imported from that file with its folder put on ``sys.path``
so that its own imports work; a dotted module is imported from the current directory or
the environment. Every failure is a ``ValueError`` whose message says what to fix.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import sys
from pathlib import Path


def load_object(spec: str) -> object:
    """Import ``module:attr`` or ``path/to/file.py:attr`` and return the attribute."""
    location, sep, attribute = spec.rpartition(":")
    if not sep or not location or not attribute:
        raise ValueError(f"write {spec!r} as module:attr or path/to/file.py:attr")
    if location.endswith(".py") or "/" in location or os.sep in location:
        path = Path(location).resolve()
        if not path.is_file():
            raise ValueError(f"no such file: {location}")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        module_spec = importlib.util.spec_from_file_location(f"_evalport_target_{path.stem}", path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot import {location}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(location)
        except ImportError as error:
            raise ValueError(f"cannot import module {location!r}: {error}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        names = [name for name in vars(module) if not name.startswith("_")]
        close = difflib.get_close_matches(attribute, names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; it has {', '.join(names)}"
        raise ValueError(f"{location} has no attribute {attribute!r}{hint}") from None
