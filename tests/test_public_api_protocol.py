"""The public faces of evalport.protocol, .runtime and .tracing, derived.

Each package's ``__init__`` is its public surface (``__all__``); its modules are private
(``_name.py``) and keep no ``__all__`` of their own. The surface is read from the package,
not compared with a copied list: what is public must be in ``__all__``, what is in
``__all__`` must resolve, be defined in the package and be documented.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import types
from pathlib import Path

import evalport.protocol as protocol
import evalport.protocol.runtime as runtime
import evalport.protocol.tracing as tracing
import pytest

FACES = {
    "evalport.protocol": protocol,
    "evalport.protocol.runtime": runtime,
    "evalport.protocol.tracing": tracing,
}
SUBPACKAGES = {
    "evalport.protocol": {"runtime", "tracing"},
    "evalport.protocol.runtime": set(),
    "evalport.protocol.tracing": set(),
}


@pytest.mark.parametrize("name", sorted(FACES))
def test_every_public_attribute_is_in_all_and_every_name_resolves(name: str) -> None:
    face = FACES[name]
    public = {
        attribute
        for attribute, value in vars(face).items()
        if not attribute.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(face.__all__) - {"__version__"}
    assert len(set(face.__all__)) == len(face.__all__)
    for attribute in face.__all__:
        assert hasattr(face, attribute), f"{name}.{attribute} does not resolve"


@pytest.mark.parametrize("name", sorted(FACES))
def test_modules_are_private_and_keep_no_all(name: str) -> None:
    folder = Path(FACES[name].__file__).parent
    for path in sorted(folder.glob("*.py")):
        if path.name == "__init__.py":
            continue
        assert path.name.startswith("_"), f"{path} is a public module: make it _{path.name}"
        tree = ast.parse(path.read_text())
        assert not any(
            isinstance(node, ast.Assign)
            and any(getattr(t, "id", "") == "__all__" for t in node.targets)
            for node in tree.body
        ), f"{path} keeps an __all__ of its own: the face is {name}"
    public_modules = {
        attribute
        for attribute, value in vars(FACES[name]).items()
        if isinstance(value, types.ModuleType) and not attribute.startswith("_")
    }
    assert public_modules <= SUBPACKAGES[name]


@pytest.mark.parametrize("name", sorted(FACES))
def test_each_name_is_defined_once_in_its_package_and_documented(name: str) -> None:
    face = FACES[name]
    for attribute in face.__all__:
        value = getattr(face, attribute)
        if inspect.isclass(value) or inspect.isfunction(value):
            # runtime re-exports the session errors the wire defines: still one class each
            home = value.__module__.rpartition(".")[0]
            assert home in FACES and value.__module__.rpartition(".")[2].startswith("_"), (
                f"{name}.{attribute} is defined in {value.__module__}, not in a private module"
            )
            assert inspect.getdoc(value), f"{name}.{attribute} has no docstring"


def test_a_name_on_both_faces_is_one_object() -> None:
    for attribute in set(protocol.__all__) & set(runtime.__all__):
        assert getattr(protocol, attribute) is getattr(runtime, attribute), attribute


@pytest.mark.parametrize("name", sorted(FACES))
def test_all_is_sorted(name: str) -> None:
    # Constants first, then classes, then the rest (the order ruff's RUF022 keeps).
    def kind(attribute: str) -> tuple[int, str]:
        return (0 if attribute.isupper() else 1 if attribute[0].isupper() else 2, attribute)

    assert FACES[name].__all__ == sorted(FACES[name].__all__, key=kind)


def test_protocol_needs_only_msgspec() -> None:
    code = (
        "import sys, evalport.protocol, evalport.protocol.runtime\n"
        "heavy = {'starlette', 'httpx', 'uvicorn', 'yaml', 'anyio', 'redis', 'opentelemetry'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
