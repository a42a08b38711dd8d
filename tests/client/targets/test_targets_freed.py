"""A target is freed as soon as it is dropped, not by the garbage collector: its client
factory holds no reference back to it (a cycle per target otherwise, made by the CLI and
by every test of a pytest session)."""

from __future__ import annotations

import gc
import weakref

import pytest
from evalport.client import AgUiTarget, HttpTarget
from evalport.client.targets import A2ATarget

TARGETS = {
    "http": (None, lambda: HttpTarget("http://agent.test/")),
    "agui": ("ag_ui.core", lambda: AgUiTarget("http://agent.test/agent")),
    "a2a": ("a2a.client", lambda: A2ATarget("http://agent.test/")),
}


@pytest.mark.parametrize("kind", TARGETS)
def test_a_dropped_target_is_freed_without_the_collector(kind: str) -> None:
    extra, make = TARGETS[kind]
    if extra is not None:
        pytest.importorskip(extra)
    gc.disable()
    try:
        target = make()
        gone = weakref.ref(target)
        del target
        assert gone() is None, f"the {kind} target is held by a cycle"
    finally:
        gc.enable()
