"""The face of evalport.client.assertions, derived from the package (see also
tests/client/test_client_public_api.py)."""

from __future__ import annotations

import importlib
import pkgutil

import evalport.client.assertions as assertions


def test_every_assertion_class_of_the_package_is_on_its_face() -> None:
    """Derived from the package: each assertion its modules define is exported (the shared
    bases that other assertions build on aside). Neuron's namespace exports its own
    classes (the names that decide as Neuron's do) on its own face."""
    defined: dict[str, type] = {}
    for info in pkgutil.iter_modules(assertions.__path__):
        module = importlib.import_module(f"{assertions.__name__}.{info.name}")
        if info.name == "neuron":
            own = [
                n
                for n, v in vars(module).items()
                if getattr(v, "__module__", "") == module.__name__
            ]
            assert set(own) <= set(module.__all__), own
            continue
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, assertions.Assertion)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                defined[name] = value
    bases = {base for value in defined.values() for base in value.__mro__[1:]}
    concrete = {name for name, value in defined.items() if value not in bases}
    assert len(concrete) > 20, "the walk found too few assertions: it is broken"
    assert concrete <= set(assertions.__all__), sorted(concrete - set(assertions.__all__))


def test_every_assertion_class_has_a_kind_and_evaluate() -> None:
    for name in assertions.__all__:
        value = getattr(assertions, name)
        if isinstance(value, type) and issubclass(value, assertions.Assertion):
            if value is assertions.Assertion:
                continue
            assert value.kind != "assertion", name
            assert (
                value.evaluate is not assertions.Assertion.evaluate or name == "EmbeddingSimilarity"
            )
