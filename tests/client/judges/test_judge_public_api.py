"""The judges face, derived from the package; simulated users are on the client face."""

from __future__ import annotations

import importlib
import pkgutil

import evalport.client as client
import evalport.client.judges as judges


def test_every_error_a_judge_raises_is_on_the_face() -> None:
    """Derived from the package: users catch these, so each exception class is exported."""
    defined = set()
    for info in pkgutil.iter_modules(judges.__path__):
        module = importlib.import_module(f"{judges.__name__}.{info.name}")
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, Exception)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                defined.add(name)
    assert {"JudgeError", "MalformedAnswer"} <= defined
    assert defined <= set(judges.__all__), sorted(defined - set(judges.__all__))


def test_simulated_public_api() -> None:
    names = {"ScriptedUser", "SimulatedUser", "SimulatedUserError", "UserSimulator"}
    assert names <= set(client.__all__)
    assert client.UserSimulator.__module__ == "evalport.client._core._conversation"
