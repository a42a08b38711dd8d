"""Missing extras: the message names the module Python could not find and the extra to
install; any other import error (evalport's own, or a name an installed package lacks)
is shown as it is."""

from __future__ import annotations

import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from evalport.protocol import MissingExtraError, require
from evalport.protocol._extras import load_plugin


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write top-level modules into a folder on ``sys.path``; forget them afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(name: str, source: str) -> str:
        path = tmp_path.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in path.relative_to(tmp_path).parents:
            (tmp_path / folder / "__init__.py").touch()
        path.write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for name in written:
        for loaded in [m for m in sys.modules if m.partition(".")[0] == name.partition(".")[0]]:
            sys.modules.pop(loaded, None)


def point(module: str) -> EntryPoint:
    """An ``evalport.commands`` entry point (its extra: the second part of the name)."""
    return EntryPoint(name="demo", value=module, group="evalport.commands")


def test_require_names_the_module_that_is_missing(modules) -> None:
    front = modules("evx_front_lib", "import evx_absent_dependency\n")
    with pytest.raises(MissingExtraError) as raised:
        require(front, "server", "evalport.server")
    message = str(raised.value)
    assert message == (
        "evalport.server needs 'evx_absent_dependency', which is not installed. "
        "Run: pip install 'evalport[server]'"
    )


def test_a_plugin_missing_a_third_party_module_names_it_and_the_extra(modules) -> None:
    module = modules("evx_pkg.client", "import evx_absent.sub\n")
    with pytest.raises(MissingExtraError) as raised:
        load_plugin(point(module), "'evalport demo'")
    assert str(raised.value) == (
        "'evalport demo' needs 'evx_absent', which is not installed. "
        "Run: pip install 'evalport[client]'"
    )


@pytest.mark.parametrize(
    "source",
    [
        "from evalport.protocol import no_such_name\n",  # a bug in evalport's own code
        "from json import no_such_name\n",  # a name an installed package lacks
        "import json.no_such_module\n",  # a submodule of an installed package
    ],
)
def test_other_import_errors_are_shown_as_they_are(modules, source: str) -> None:
    module = modules(f"evx_bug_{abs(hash(source))}.client", source)
    with pytest.raises(ImportError) as raised:
        load_plugin(point(module), "'evalport demo'")
    assert not isinstance(raised.value, MissingExtraError)
    assert "no_such" in str(raised.value)
    with pytest.raises(ImportError) as raised:
        require(module, "server", "evalport.server")
    assert not isinstance(raised.value, MissingExtraError)
