"""The pytest plugin: the ``evalport`` and ``evalport_target`` fixtures, with no async plugin
needed. A test with no target configured fails, never skips, and a test is held to
``evalport run``'s rules for a case. See ARCHITECTURE.md, "The pytest plugin".
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import Awaitable, Callable, Generator
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from evalport.protocol import DEFAULT_TOKEN_ENV

if TYPE_CHECKING:
    from evalport.client import AssertionResult, EvalContext

    from ._targets import PreparedTarget

T = TypeVar("T")


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


def _configured(make: Callable[[], T]) -> T:
    """``make()``, or the test fails with the configuration error's one line (raised
    outside the ``except``, so pytest prints no chained copy of it)."""
    from .._core import ConfigError

    try:
        return make()
    except ConfigError as error:
        problem = str(error)
    pytest.fail(f"evalport: {problem}", pytrace=False)


def _named(config: pytest.Config, key: str) -> str:
    """Where the setting ``key`` was written: the option, the ini key or the config key."""
    name = key.replace("-", "_")
    if config.getoption(f"evalport_{name}"):
        return f"--evalport-{key}"
    if config.getini(f"evalport_{name}"):
        return f"ini evalport_{name}"
    return f"[tool.evalport] {key}"


_SOFT = pytest.StashKey[list[str]]()
"""The failed soft assertions of the session's tests, for the summary."""


class _Verification:
    """The assertions of one test's context, and how many were verified already."""

    def __init__(self, context: EvalContext, config: pytest.Config) -> None:
        self.context = context
        self.verified = 0
        self.results: list[AssertionResult] = []
        self.soft = config.stash.setdefault(_SOFT, [])

    def _failure(self, result: AssertionResult) -> str | None:
        if not result.evaluated and "judge_error" in result.context:
            return f"{result.label or result.name}: {result.message}"  # an error, soft or not
        if result.failed_gate or (self.context.strict and result.failed_soft):
            label = result.label or result.name
            return f"{label}: {result.message or 'failed'} (score {result.score:.2f})"
        return None

    async def verify(self) -> None:
        """Resolve what is pending (judges included); fail the test on failed gates."""
        pending = self.context.expectations[self.verified :]
        self.verified += len(pending)
        results = [await expectation.resolve() for expectation in pending]
        self.results += results
        for result in results:
            if result.failed_soft and not self.context.strict:
                label = result.label or result.name
                message = f"{label}: {result.message or 'failed'} (score {result.score:.2f})"
                self.soft.append(f"{self.context.case_id}: {message}")
        failures = [self._failure(result) for result in results]
        _fail([failure for failure in failures if failure])

    async def close(self, test: Callable[..., Any]) -> None:
        """The test returned: verify what is pending, then apply the rules of a case's end
        as ``evalport run`` does (:func:`~evalport.client._core.left_pending`,
        ``asserted_nothing``, ``failed_turns``)."""
        from .._core import asserted_nothing, failed_turns, left_pending

        await self.verify()
        context = self.context
        problem = left_pending(context) or asserted_nothing(
            context, self.results, context.case_id, test
        )
        failures = [f"{problem[0]}: {problem[1]}"] if problem else []
        turns = failed_turns(context, self.results)
        _fail(failures + [failure for failure in map(self._failure, turns) if failure])


def _fail(failures: list[str]) -> None:
    if failures:
        pytest.fail("evalport assertions failed:\n  " + "\n  ".join(failures), pytrace=False)


class _Pending:
    """A fixture's value until the test's coroutine makes it live: it says so when used."""

    def __init__(self, fixture: str) -> None:
        self.fixture = fixture

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"evalport: the {self.fixture!r} fixture is live only inside the async test "
            f"function that asks for it, not in other fixtures (asked for {name!r})"
        )


class _PendingTarget(_Pending):
    def __init__(self, prepared: PreparedTarget) -> None:
        super().__init__("evalport_target")
        self.prepared = prepared

    async def start(self, stack: AsyncExitStack) -> Any:
        from .._core import ConfigError
        from ._targets import TargetUnreachable

        stack.push_async_callback(self.prepared.aclose)
        try:
            await self.prepared.prepare()
        except (TargetUnreachable, ConfigError) as error:
            problem = str(error)
        else:
            return self.prepared.target
        pytest.fail(f"evalport: {problem}", pytrace=False)  # outside: no chained copy


class _PendingContext(_Pending):
    def __init__(self, case_id: str, options: dict[str, Any], judge: Any, owned: Any) -> None:
        super().__init__("evalport")
        self.case_id = case_id
        self.options = options
        self.judge = judge
        self.owned_judge = owned  # made by the plugin, closed by it

    async def start(
        self, stack: AsyncExitStack, target: Any, config: pytest.Config
    ) -> _Verification:
        from evalport.client import EvalContext

        aclose = getattr(self.owned_judge, "aclose", None)
        if aclose is not None:
            stack.push_async_callback(aclose)
        session = await target.open(case_id=self.case_id)
        context = EvalContext(
            target,
            session,
            case_id=self.case_id,
            case_judge=self.judge,
            strict=bool(self.options.get("strict", False)),
            approval_policy=self.options.get("approval_policy"),
        )

        async def close_sessions() -> None:
            for opened in context.opened:
                await opened.close()

        stack.push_async_callback(close_sessions)
        verification = _Verification(context, config)
        context.verify = verification.verify  # type: ignore[attr-defined]
        return verification


def _live(item: pytest.Function, test: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """The test as one coroutine: the fixtures made live, the test, its verification."""

    @functools.wraps(test)
    async def live(*args: Any, **kwargs: Any) -> None:
        async with AsyncExitStack() as stack:
            target = item.funcargs.get("evalport_target")
            if isinstance(target, _PendingTarget):
                target = await target.start(stack)
            if "evalport_target" in kwargs:
                kwargs["evalport_target"] = target
            verification = None
            pending = item.funcargs.get("evalport")
            if isinstance(pending, _PendingContext):
                verification = await pending.start(stack, target, item.config)
                if "evalport" in kwargs:
                    kwargs["evalport"] = verification.context
            await test(*args, **kwargs)
            if verification is not None:
                await verification.close(test)

    return live


_LIVE = pytest.StashKey[Callable[..., Any]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Wrap a test that uses the fixtures, before any plugin takes it to run."""
    if not isinstance(item, pytest.Function) or not any(
        isinstance(value, _Pending) for value in item.funcargs.values()
    ):
        return (yield)
    test = item.obj
    if not inspect.iscoroutinefunction(test):
        pytest.fail(
            f"evalport: {item.name} uses the evalport fixtures: make it an `async def` test",
            pytrace=False,
        )
    live = item.stash[_LIVE] = _live(item, test)
    item.obj = live
    try:
        return (yield)
    finally:
        item.obj = test


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run the wrapped test on a loop of its own, unless another plugin runs it.

    pytest-asyncio replaces the test it runs by a synchronous function that drives its
    loop; a test still wrapped by :func:`_live` here is one no plugin took.
    """
    live = pyfuncitem.stash.get(_LIVE, None)
    if live is None or pyfuncitem.obj is not live or "anyio_backend" in pyfuncitem.funcargs:
        return None
    parameters = inspect.signature(live).parameters
    asyncio.run(live(**{name: pyfuncitem.funcargs[name] for name in parameters}))
    return True


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """List the failed soft assertions: they pass the test, but are never hidden."""
    soft = config.stash.get(_SOFT, [])
    if soft:
        terminalreporter.section("evalport soft failures")
        for line in soft:
            terminalreporter.line(line)


@pytest.fixture
def evalport_target(request: pytest.FixtureRequest) -> Any:
    """The configured target; the test fails, naming the settings, when none is."""
    from .._core import load_settings
    from ._targets import build_target

    config = request.config
    settings = _configured(lambda: load_settings(config.rootpath))
    url, local = _setting(config, "target"), _setting(config, "local")
    if url or local:  # an option or an ini key overrides the project's target
        settings.target, settings.local = url, local
    settings.token_env = _setting(config, "token_env") or settings.token_env
    if not settings.target and not settings.local:
        pytest.fail(
            "evalport: no target: set target (a URL) or local (module:attr) under "
            "[tool.evalport] in pyproject.toml, or pass --evalport-target URL or "
            "--evalport-local module:attr",
            pytrace=False,
        )
    if settings.token_env is None and os.environ.get(DEFAULT_TOKEN_ENV):
        settings.token_env = DEFAULT_TOKEN_ENV  # else: a server without auth (loopback)
    named = {key: _named(config, key) for key in ("local", "token-env")}
    return _PendingTarget(_configured(lambda: build_target(settings, named=named)))


@pytest.fixture
def evalport(request: pytest.FixtureRequest, evalport_target: Any) -> Any:
    """An eval context on a fresh session of the configured target."""
    marker = request.node.get_closest_marker("evalport")
    options = dict(marker.kwargs) if marker is not None else {}
    judge = options.get("judge")
    owned = None
    if judge is None:
        owned = judge = _configured_judge(request.config)
    return _PendingContext(request.node.nodeid, options, judge, owned)


def _configured_judge(config: pytest.Config) -> Any:
    """The judge of the project's ``[tool.evalport.judge]``, else of ``EVALPORT_JUDGE_*``."""
    from .._core import load_settings
    from ._targets import build_judge

    return _configured(lambda: build_judge(load_settings(config.rootpath)))
