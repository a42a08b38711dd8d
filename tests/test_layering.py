"""The layering rule of ARCHITECTURE.md, checked on the source.

protocol (the wire) <- protocol.runtime <- server, client. A lower layer never names a
higher one, not even in a string; server and client never import each other; and no
evalport modules import each other in a cycle (imports made only for type checking aside,
module-level and deferred imports alike).
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


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imports_of(module: str) -> set[str]:
    """The evalport modules ``module`` imports (deferred imports too, type checking not)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    skip = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
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


def layer(module: str) -> str:
    if module.startswith("evalport.protocol.runtime"):
        return "runtime"
    return module.split(".")[1]


ALLOWED = {
    "protocol": {"protocol"},
    "runtime": {"protocol", "runtime"},
    "server": {"protocol", "runtime", "server"},
    "client": {"protocol", "runtime", "client"},
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
    # Package faces take part: a module that imports the face that re-exports it is a cycle.
    cycles = _cycles({module: imports_of(module) for module in MODULES})
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


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
