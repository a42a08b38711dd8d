"""The public API of evalport.client, derived from the package itself (no copied list).

A face is a public module (no ``_`` in its dotted name below ``evalport.client``): the
package and its public subpackages, plus the two catalogue namespaces below. Its
``__all__`` is its API. Everything else is a private module without ``__all__``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import types

import evalport.client as client
import evalport.protocol as protocol
import evalport.protocol.runtime as runtime

PACKAGE = "evalport.client"

# Public modules that are not packages, each deliberately: a namespace users import.
NAMESPACES = {
    "evalport.client.assertions.neuron",  # `from ....neuron import *`: Neuron's names
    "evalport.client.judges.criteria",  # `criteria.factuality(...)`: the criteria catalogue
}
# Classes the client re-exports from the layers below it (defined there, once).
FROM_BELOW = {
    "AuthFailed",
    "ContentPartsUnsupported",
    "FaultsUnsupported",
    "NotSuspended",
    "ProtocolError",
    "RequestRejected",
    "SessionBusy",
    "SessionConflict",
    "SessionNotFound",
    "SessionSuspended",
    "TargetError",
    "TargetUnavailable",
    "ToolFault",
    "TracePolicy",
    "TurnLost",
    "TurnTimedOut",
}


def _modules() -> dict[str, types.ModuleType]:
    found = {PACKAGE: client}
    for info in pkgutil.walk_packages(client.__path__, prefix=PACKAGE + "."):
        found[info.name] = importlib.import_module(info.name)
    return found


MODULES = _modules()


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split(".")[2:])


PUBLIC = {name: module for name, module in MODULES.items() if not _private(name)}
FACES = {
    name: module
    for name, module in PUBLIC.items()
    if hasattr(module, "__path__") or name in NAMESPACES
}


def test_no_implementation_module_is_public() -> None:
    plain = {name for name, module in PUBLIC.items() if not hasattr(module, "__path__")}
    assert plain == NAMESPACES
    assert set(FACES) >= {
        "evalport.client",
        "evalport.client.assertions",
        "evalport.client.cli",
        "evalport.client.judges",
        "evalport.client.reports",
    }


def test_private_modules_have_no_all() -> None:
    assert [
        name for name, module in MODULES.items() if _private(name) and hasattr(module, "__all__")
    ] == []


def test_every_name_in_all_resolves_and_is_documented() -> None:
    for face_name, face in FACES.items():
        assert len(set(face.__all__)) == len(face.__all__), face_name
        for name in face.__all__:
            assert hasattr(face, name), f"{face_name}.{name}"
            value = getattr(face, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert inspect.getdoc(value), f"{face_name}.{name} has no docstring"


def test_every_public_attribute_of_a_face_is_in_all() -> None:
    for face_name, face in FACES.items():
        shown = {
            name
            for name, value in vars(face).items()
            if not name.startswith("_")
            and not isinstance(value, types.ModuleType)
            and name != "annotations"  # `from __future__ import annotations`
        }
        assert sorted(shown - set(face.__all__)) == [], face_name


def test_each_exported_class_is_defined_once() -> None:
    below = {name for name in protocol.__all__} | {name for name in runtime.__all__}
    for face_name, face in FACES.items():
        for name in face.__all__:
            value = getattr(face, name)
            if not inspect.isclass(value):
                continue
            home = value.__module__
            if home in NAMESPACES:  # neuron's Mode: an alias namespace of its own
                continue
            if home.startswith(PACKAGE + "."):
                assert _private(home) and home in MODULES, f"{face_name}.{name} from {home}"
            else:
                assert name in FROM_BELOW and name in below, f"{face_name}.{name} from {home}"
                assert home.startswith("evalport.protocol"), f"{face_name}.{name} from {home}"
    # No class name is defined twice in the client, nor again after the layers below.
    defined: dict[str, str] = {}
    for module_name, module in MODULES.items():
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module_name:
                assert name not in defined, f"{name}: {defined.get(name)} and {module_name}"
                assert name not in below, f"{name} in {module_name} is also in evalport.protocol"
                defined[name] = module_name


def test_the_same_name_is_the_same_object_on_every_face() -> None:
    seen: dict[str, object] = {}
    for face in FACES.values():
        for name in face.__all__:
            value = getattr(face, name)
            assert seen.setdefault(name, value) is value, name


def test_neuron_names_come_with_a_star_import() -> None:
    namespace: dict[str, object] = {}
    exec("from evalport.client.assertions.neuron import *", namespace)
    assert {"StringContains", "TrajectoryMatches", "Mode"} <= set(namespace)


def test_client_does_not_import_the_server() -> None:
    code = (
        "import sys, evalport.client; "
        "bad = [m for m in sys.modules if m.startswith(('evalport.server', 'starlette', 'uvicorn'))]; "
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
