"""Load an object named on the command line as ``module:attr`` or ``path/to/file.py:attr``.

Every failure is a ``ValueError`` saying what to fix. Rules: see ARCHITECTURE.md,
"Shared below the server and the client".
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import sys
import sysconfig
import traceback
from pathlib import Path

_LIBRARIES = tuple(
    os.path.join(os.path.abspath(sysconfig.get_paths()[name]), "")
    for name in ("stdlib", "purelib", "platlib")
)


def _raised_on_import(location: str, error: BaseException) -> str:
    """``file:line: importing LOCATION raised Type: message``, at the innermost frame of
    the user's code (not Python's, a library's or the import machinery's)."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith("<")
        and not os.path.abspath(frame.filename).startswith(_LIBRARIES)
        and os.path.abspath(frame.filename) != os.path.abspath(__file__)
    ]
    where = ""
    if frames:
        frame = frames[-1]
        shown = os.path.relpath(frame.filename)
        where = f"{frame.filename if shown.startswith('..') else shown}:{frame.lineno}: "
    text = str(error).splitlines()[0] if str(error) else ""
    raised = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return f"{where}importing {location} raised {raised}"


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
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:
            del sys.modules[module_spec.name]
            raise ValueError(_raised_on_import(location, error)) from None
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(location)
        except ModuleNotFoundError as error:
            if error.name is None or not location.startswith(error.name):
                raise ValueError(_raised_on_import(location, error)) from None
            raise ValueError(f"cannot import module {location!r}: {error}") from None
        except Exception as error:
            raise ValueError(_raised_on_import(location, error)) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        names = [name for name in vars(module) if not name.startswith("_")]
        close = difflib.get_close_matches(attribute, names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; it has {', '.join(names)}"
        raise ValueError(f"{location} has no attribute {attribute!r}{hint}") from None
