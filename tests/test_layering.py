"""The layering rule of ARCHITECTURE.md, checked on the source.

protocol (the wire) <- protocol.runtime <- server, client. A lower layer never names a
higher one, not even in a string; server and client never import each other; no evalport
modules import each other in a cycle (module-level, deferred and ``TYPE_CHECKING`` imports
alike); and a module imports a private module (``_name``) of another package only where
ARCHITECTURE.md lists that import (its table "Private imports across packages" is read
here). A package is a folder with an ``__init__.py``: ``evalport.client.reports`` is one,
``evalport.client`` another, and ``evalport.client._core`` (the core) a third. The core is a
layer of its own under the rest of the client: it imports nothing of the client outside
itself, and the rest enters it through its face.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "evalport.protocol": "protocol",
    "evalport.server": "server",
    "evalport.client": "client",
}


def modules() -> dict[str, Path]:
    found = {}
    for name, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([name, *parts])] = path
    return found


MODULES = modules()


def package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def imports_of(module: str) -> set[str]:
    """The evalport modules ``module`` imports (deferred and type-checking imports too)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    package = package_of(module)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names = [f"{source}.{alias.name}" for alias in node.names]
            if any(name not in MODULES for name in names):  # a name from the module itself
                names.append(source)
        else:
            continue
        found.update(name for name in names if name in MODULES and name != module)
    return found


def test_every_evalport_import_names_a_module() -> None:
    # An import of a module that moved would hide under ``TYPE_CHECKING`` (mypy is told to
    # ignore missing imports) and out of the rules above.
    missing = []
    for module, path in MODULES.items():
        package = package_of(module)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    sources = [".".join(base + ([node.module] if node.module else []))]
                else:
                    sources = [node.module or ""]
            elif isinstance(node, ast.Import):
                sources = [alias.name for alias in node.names]
            else:
                continue
            missing += [
                f"{module}:{node.lineno} {source}"
                for source in sources
                if source.startswith("evalport.") and source not in MODULES
            ]
    assert not missing, missing


def layer(module: str) -> str:
    if module.startswith("evalport.protocol.runtime"):
        return "runtime"
    if module.startswith("evalport.client._core"):
        return "core"
    return module.split(".")[1]


ALLOWED = {
    "protocol": {"protocol"},
    "runtime": {"protocol", "runtime"},
    "server": {"protocol", "runtime", "server"},
    "core": {"protocol", "runtime", "core"},  # no assertions, judges, reports, cli, context
    "client": {"protocol", "runtime", "core", "client"},
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module: str) -> None:
    wrong = sorted(name for name in imports_of(module) if layer(name) not in ALLOWED[layer(module)])
    assert not wrong, f"{module} ({layer(module)}) imports {wrong}"


def test_protocol_names_no_upper_package_even_in_a_string() -> None:
    upper = re.compile(r"evalport\.(server|client)\b")
    named = [
        f"{path.relative_to(ROOT)}:{number}"
        for module, path in MODULES.items()
        if layer(module) in ("protocol", "runtime")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if upper.search(line)
    ]
    assert not named, named


def test_the_wire_does_not_name_the_runtime() -> None:
    named = [
        module
        for module, path in MODULES.items()
        if layer(module) == "protocol" and "evalport.protocol.runtime" not in module
        for name in imports_of(module)
        if layer(name) == "runtime"
    ]
    assert not named, named


def test_no_import_cycles() -> None:
    # Package faces take part: a module that imports the face that re-exports it is a cycle;
    # so do imports made only for type checking.
    cycles = _cycles({module: imports_of(module) for module in MODULES})
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def listed_private_imports() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The rows of ARCHITECTURE.md's table "Private imports across packages": the packages
    that may import (their modules and subpackages) and the private modules they may."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("### Private imports across packages", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        importers, imported = (tuple(re.findall(r"`([\w.]+)`", cell)) for cell in cells[:2])
        rows.append((importers, imported))
    assert rows, "ARCHITECTURE.md lists no private imports across packages"
    return rows


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _private(module: str) -> bool:
    return module.rpartition(".")[2].startswith("_")


def private_imports_across_packages() -> set[tuple[str, str]]:
    return {
        (module, name)
        for module in MODULES
        for name in imports_of(module)
        if _private(name) and package_of(name) != package_of(module)
    }


def test_private_imports_across_packages_are_the_listed_ones() -> None:
    rows = listed_private_imports()
    for importers, imported in rows:
        for name in (*importers, *imported):
            assert name in MODULES, f"ARCHITECTURE.md lists {name}, which is no module"

    def listed(module: str, name: str) -> bool:
        return any(
            name in imported and any(_within(module, package) for package in importers)
            for importers, imported in rows
        )

    made = private_imports_across_packages()
    unlisted = sorted(
        f"{module} imports {name}" for module, name in made if not listed(module, name)
    )
    assert not unlisted, "private imports across packages not in ARCHITECTURE.md: " + str(unlisted)
    unused = [
        (importers, name)
        for importers, imported in rows
        for name in imported
        if not any(n == name and any(_within(m, p) for p in importers) for m, n in made)
    ]
    assert not unused, f"ARCHITECTURE.md lists private imports nothing makes: {unused}"


def test_the_client_enters_the_core_through_its_face() -> None:
    # The upper layer (context, trial, runner), the public faces and the parts import the
    # core's face, never one of its modules or rooms (which ARCHITECTURE.md lists apart).
    entered = {
        name
        for module in MODULES
        if layer(module) == "client"
        for name in imports_of(module)
        if layer(name) == "core"
    }
    assert entered == {"evalport.client._core"}, entered


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found
