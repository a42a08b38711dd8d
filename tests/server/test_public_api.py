"""The server's public surface, derived from its packages (no copied list of names).

Each face (``evalport.server``, ``evalport.server.stores``, ``evalport.server.adapters``)
declares its names in ``__all__``: every one resolves, every public attribute of the
package is one of them (or a public subpackage), and the only public submodules are the
two subpackages. Implementation modules are private and declare no ``__all__``.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import evalport.protocol.runtime as runtime
import evalport.server as server
import pytest

FACES = ("evalport.server", "evalport.server.stores", "evalport.server.adapters")
SUBPACKAGES = {"evalport.server.stores", "evalport.server.adapters"}
AGENT_INTERFACE = ("ApprovalRejected", "SessionInfo", "TurnContext", "tool")


def _submodules(package: types.ModuleType) -> list[pkgutil.ModuleInfo]:
    return list(pkgutil.iter_modules(package.__path__, package.__name__ + "."))


@pytest.mark.parametrize("name", FACES)
def test_every_name_of_a_face_resolves_and_is_sorted(name: str) -> None:
    face = importlib.import_module(name)
    assert face.__all__ == sorted(face.__all__)
    pytest.importorskip("redis")  # (RedisStore resolves on first use, with the extra)
    for exported in face.__all__:
        if name == "evalport.server.adapters":
            continue  # each adapter needs its framework: tests/server/adapters import them
        assert getattr(face, exported) is not None, exported


@pytest.mark.parametrize("name", FACES)
def test_every_public_attribute_of_a_face_is_exported(name: str) -> None:
    face = importlib.import_module(name)
    public = {
        attribute
        for attribute, value in vars(face).items()
        if not attribute.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public <= set(face.__all__)


@pytest.mark.parametrize("name", FACES)
def test_the_only_public_submodules_are_the_subpackages(name: str) -> None:
    face = importlib.import_module(name)
    public = {info.name for info in _submodules(face) if info.name.rsplit(".", 1)[1][0] != "_"}
    assert public == (SUBPACKAGES if name == "evalport.server" else set())


def test_implementation_modules_declare_no_names_of_their_own() -> None:
    for face_name in FACES:
        face = importlib.import_module(face_name)
        for info in _submodules(face):
            if info.ispkg or info.name.rsplit(".", 1)[1] in {
                "_langgraph",
                "_openai_agents",
                "_pydantic_ai",
            }:
                continue  # (subpackages are faces; adapter modules need their frameworks)
            module = importlib.import_module(info.name)
            assert not hasattr(module, "__all__"), info.name


def test_the_agent_interface_is_the_runtimes() -> None:
    for name in AGENT_INTERFACE:
        assert name in server.__all__ and getattr(server, name) is getattr(runtime, name)


def test_memory_store_satisfies_the_store_protocols() -> None:
    from evalport.server.stores import MemoryStore, SessionStore

    assert isinstance(MemoryStore(), SessionStore)
