"""The pytest plugin: evaluate agents from an existing test suite, with the same assertions.

Rules:

- Options (or ini keys of the same name without dashes): ``--evalport-target URL`` or
  ``--evalport-local module:attr`` names the agent; ``--evalport-token-env VAR`` (default
  ``EVALPORT_TOKEN``) names the variable holding the bearer token. A test that asks for a
  fixture while no target is configured is **skipped** with a message saying what to pass.
- ``evalport_target`` is the target (function-scoped: it lives on the test's event loop).
- ``evalport`` is an :class:`~evalport.client.EvalContext` on a fresh session of
  that target, the context eval cases receive: ``await evalport.send(...)``, then the same
  assertion methods. A failed gate fails the test when it ends, with each failure listed.
  Deferred and judged assertions are resolved as soon as the test function returns, on
  its event loop, so a failure among them fails the test itself; ``await
  evalport.verify()`` resolves everything made so far, judges included, earlier. What a
  test that raised left pending is resolved at teardown (a failure there is a teardown
  error). Nothing passes unverified; the session is closed in every case.
- ``@pytest.mark.evalport(approval_policy=..., judge=..., strict=...)`` sets those for the
  test's context. ``strict`` makes failed soft assertions fail too. Without a ``judge``
  there, the one configured under ``[tool.evalport.judge]`` in the project's
  ``pyproject.toml`` is used, else the one ``EVALPORT_JUDGE_*`` variables describe (a
  fresh client per test, closed afterwards).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from evalport.protocol import DEFAULT_TOKEN_ENV

if TYPE_CHECKING:
    from ._context import EvalContext
    from ._results import AssertionResult

_DEFAULT_TOKEN_ENV = DEFAULT_TOKEN_ENV


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalport", "evaluate agents with evalport")
    group.addoption(
        "--evalport-target", metavar="URL", help="base URL of the agent's eval protocol"
    )
    group.addoption("--evalport-local", metavar="TARGET", help="in-process agent: module:attr")
    group.addoption("--evalport-token-env", metavar="VAR", help="variable holding the token")
    parser.addini("evalport_target", "base URL of the agent's eval protocol", default="")
    parser.addini("evalport_local", "in-process agent: module:attr", default="")
    parser.addini("evalport_token_env", "variable holding the bearer token", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "evalport(approval_policy=None, judge=None, strict=False): options of the evalport context",
    )


def _setting(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(f"evalport_{name}") or config.getini(f"evalport_{name}")
    return str(value) if value else None


class _Verification:
    """The assertions of one test's context, and how many were verified already."""

    def __init__(self, context: EvalContext, loop: asyncio.AbstractEventLoop) -> None:
        self.context = context
        self.loop = loop  # the test's event loop, where its judges' clients live
        self.verified = 0

    @property
    def pending(self) -> bool:
        return self.verified < len(self.context.expectations)

    def _failure(self, result: AssertionResult) -> str | None:
        if result.failed_gate or (self.context.strict and result.failed_soft):
            label = result.label or result.name
            return f"{label}: {result.message or 'failed'} (score {result.score:.2f})"
        return None

    async def verify(self) -> None:
        """Resolve what is pending (judges included); fail the test on failed gates."""
        pending = self.context.expectations[self.verified :]
        self.verified += len(pending)
        failures = [self._failure(await expectation.resolve()) for expectation in pending]
        _fail([failure for failure in failures if failure])

    def settled_failures(self) -> list[str]:
        """Failed gates among pending assertions already evaluated (no I/O needed)."""
        from ._handles import AssertionHandle

        failures = []
        expectations = self.context.expectations
        while self.verified < len(expectations):
            handle = expectations[self.verified]
            if not isinstance(handle, AssertionHandle):
                break  # a deferred or judged assertion: verified once the test returns, in order
            failure = self._failure(handle.result)
            if failure:
                failures.append(failure)
            self.verified += 1
        return failures


def _fail(failures: list[str]) -> None:
    if failures:
        pytest.fail(_message(failures), pytrace=False)


def _message(failures: list[str]) -> str:
    return "evalport assertions failed:\n  " + "\n  ".join(failures)


_VERIFICATION = pytest.StashKey[_Verification]()


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    """Resolve what the test left pending right after it returns, on its event loop."""
    outcome = yield
    verification = pyfuncitem.stash.get(_VERIFICATION, None)
    if verification is not None and verification.pending and not verification.loop.is_running():
        verification.loop.run_until_complete(verification.verify())
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    verification = item.stash.get(_VERIFICATION, None)
    if verification is not None and report.when == "call" and report.passed:
        failures = verification.settled_failures()
        if failures:
            report.outcome = "failed"
            report.longrepr = _message(failures)
    return report


@pytest.fixture
async def evalport_target(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The configured target; the test is skipped when none is configured."""
    from ._config import ConfigError, Settings
    from .cli._targets import TargetUnreachable, build_target

    config = request.config
    url, local = _setting(config, "target"), _setting(config, "local")
    if not url and not local:
        pytest.skip(
            "no evalport target: pass --evalport-target URL or --evalport-local module:attr"
        )
    token_env = _setting(config, "token_env")
    if token_env is None and os.environ.get(_DEFAULT_TOKEN_ENV):
        token_env = _DEFAULT_TOKEN_ENV  # else: a server without auth (loopback)
    try:
        prepared = build_target(Settings(target=url, local=local, token_env=token_env))
    except ConfigError as error:
        pytest.fail(f"evalport: {error}", pytrace=False)
    try:
        try:
            await prepared.prepare()
        except (TargetUnreachable, ConfigError) as error:
            pytest.fail(f"evalport: {error}", pytrace=False)
        yield prepared.target
    finally:
        await prepared.aclose()


@pytest.fixture
async def evalport(request: pytest.FixtureRequest, evalport_target: Any) -> AsyncIterator[Any]:
    """An eval context on a fresh session of the configured target."""
    from ._context import EvalContext

    marker = request.node.get_closest_marker("evalport")
    options = dict(marker.kwargs) if marker is not None else {}
    judge = options.get("judge")
    owned_judge = None
    if judge is None:
        owned_judge = judge = _configured_judge(request.config)
    session = await evalport_target.open(case_id=request.node.nodeid)
    context = EvalContext(
        evalport_target,
        session,
        case_id=request.node.nodeid,
        case_judge=judge,
        strict=bool(options.get("strict", False)),
        approval_policy=options.get("approval_policy"),
    )
    verification = _Verification(context, asyncio.get_running_loop())
    context.verify = verification.verify  # type: ignore[attr-defined]
    request.node.stash[_VERIFICATION] = verification
    try:
        yield context
        await verification.verify()  # deferred and judged assertions, at the latest
    finally:
        for opened in context.opened:
            await opened.close()
        aclose = getattr(owned_judge, "aclose", None)
        if aclose is not None:
            await aclose()


def _configured_judge(config: pytest.Config) -> Any:
    """The judge of the project's ``[tool.evalport.judge]``, else of ``EVALPORT_JUDGE_*``."""
    from ._config import ConfigError, load_settings
    from .cli._targets import build_judge

    try:
        return build_judge(load_settings(config.rootpath))
    except ConfigError as error:
        pytest.fail(f"evalport: {error}", pytrace=False)
