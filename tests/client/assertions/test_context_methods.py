"""The ctx.* assertion methods delegate to the assertion classes: one signature each."""

from __future__ import annotations

import inspect

from evalport.client import EvalContext, SyncEvalContext
from evalport.client._methods import AssertionMethods, Delegate
from evalport.client.assertions import Contains


def _delegates() -> dict[str, Delegate]:
    return {
        name: value for name, value in vars(AssertionMethods).items() if isinstance(value, Delegate)
    }


def test_each_method_has_its_class_signature_and_docstring() -> None:
    delegates = _delegates()
    assert {"contains", "called_tool", "tool_was_approved", "similar_to"} <= set(delegates)
    for name, delegate in delegates.items():
        method = getattr(EvalContext, name)
        assert method.__name__ == name
        own = list(inspect.signature(method).parameters.values())[1:]
        assert own == list(inspect.signature(delegate.kind).parameters.values()), name
        assert (inspect.getdoc(delegate.kind) or "") in (method.__doc__ or ""), name
        assert getattr(SyncEvalContext, name) is method


class _Recorder(AssertionMethods):
    def __init__(self, run: object) -> None:
        self._run = run
        self.registered: list[object] = []

    @property
    def run(self):  # type: ignore[override]
        return self._run

    def register(self, expectation) -> None:  # type: ignore[no-untyped-def]
        self.registered.append(expectation)


def test_a_method_evaluates_its_class_on_the_reply_and_registers_it() -> None:
    from evalport.protocol import AgentRun

    ctx = _Recorder(AgentRun(session_id="s", reply="Refunds take 5 days."))
    handle = ctx.contains("refunds", case_sensitive=False)
    assert ctx.registered == [handle]
    expected = Contains("refunds", case_sensitive=False).evaluate("Refunds take 5 days.")
    assert handle.result.passed and handle.result.name == expected.name
