"""Class-based evaluators, for suites ported from Neuron AI: each dataset item an ordinary
case. One instance serves concurrent items (``self.ctx`` is a context variable). See
ARCHITECTURE.md, "Discovery and evaluators".
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ._core import (
    ApprovalPolicy,
    Case,
    CaseSpec,
    ConcurrencyLimit,
    Dataset,
    DatasetRow,
    dataset_of,
    describe_row,
    source_of,
)
from .assertions import Assertion
from .judges import JudgeCheck

_current: contextvars.ContextVar[Any] = contextvars.ContextVar("evalport_evaluator_ctx")


class Evaluator:
    """Base class of Neuron-style evaluators.

    Implement ``dataset()`` (a Dataset, a list of mappings, or a path relative to the
    defining file), ``run(item)`` (drive the agent through ``self.ctx``; what it returns is
    the item's output) and ``evaluate(output, item)`` (``self.check(assertion, subject)`` or
    any ``self.ctx`` method); ``set_up()`` runs once, first. Each may be sync or async. The
    class attributes below play ``@eval_case``'s options; each item is a case
    ``<ClassName>[<row id>]``. A constructor with dependencies needs the project's
    ``factory``.

    Items run concurrently on the one evaluator ``set_up()`` prepared (a sync
    evaluator's in worker threads). Set ``concurrency = 1`` on the class to run its items
    one at a time, as Neuron does.
    """

    description: ClassVar[str | None] = None
    tags: ClassVar[Sequence[str]] = ()
    judge: ClassVar[Any] = None
    timeout: ClassVar[float | None] = None
    approval_policy: ClassVar[ApprovalPolicy | None] = None
    concurrency: ClassVar[int | None] = None
    """At most this many items at once (``1``: one at a time, as Neuron); ``None``: the
    run's concurrency."""

    # -- to implement ---------------------------------------------------------------------

    def dataset(self) -> Dataset | Sequence[Mapping[str, Any]] | str | Path:
        raise NotImplementedError(f"{type(self).__name__} must implement dataset()")

    def set_up(self) -> Any:
        """Prepare shared resources; runs once, before the first item."""

    def run(self, item: DatasetRow) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement run(item)")

    def evaluate(self, output: Any, item: DatasetRow) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement evaluate(output, item)")

    # -- helpers ----------------------------------------------------------------------------

    @property
    def ctx(self) -> Any:
        """The eval context of the item being evaluated."""
        try:
            return _current.get()
        except LookupError:
            raise RuntimeError("self.ctx is only available while an item runs") from None

    def check(self, assertion: Assertion | JudgeCheck, subject: Any = None) -> Any:
        """Neuron's ``$this->assert(assertion, output)``: evaluate and record."""
        return self.ctx.check(assertion, subject)


class _Items:
    """Runs the items of one evaluator: ``set_up`` once (whether items run in the event
    loop or in worker threads), then ``run`` and ``evaluate`` with ``self.ctx`` bound."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self._set_up_done = False
        self._sync_lock = threading.Lock()
        self._async_lock: asyncio.Lock | None = None

    async def _set_up_async(self) -> None:
        if self._async_lock is None:
            self._async_lock = asyncio.Lock()
        async with self._async_lock:
            if not self._set_up_done:
                outcome = self.evaluator.set_up()
                if inspect.isawaitable(outcome):
                    await outcome
                self._set_up_done = True

    def _set_up_sync(self, ctx: Any) -> None:
        with self._sync_lock:
            if not self._set_up_done:
                outcome = self.evaluator.set_up()
                if inspect.iscoroutine(outcome):
                    ctx.block(outcome)
                self._set_up_done = True

    async def run_async(self, ctx: Any, item: DatasetRow) -> None:
        token = _current.set(ctx)
        try:
            await self._set_up_async()
            output = self.evaluator.run(item)
            if inspect.isawaitable(output):
                output = await output
            ctx.record_output(output)
            outcome = self.evaluator.evaluate(output, item)
            if inspect.isawaitable(outcome):
                await outcome
        finally:
            _current.reset(token)

    def run_sync(self, ctx: Any, item: DatasetRow) -> None:
        token = _current.set(ctx)
        try:
            self._set_up_sync(ctx)
            output = self.evaluator.run(item)
            ctx.record_output(output)
            outcome = self.evaluator.evaluate(output, item)
            if inspect.iscoroutine(outcome):
                ctx.block(outcome)
        finally:
            _current.reset(token)


def _built(cls: type[Evaluator]) -> Evaluator:
    """``cls()``; a constructor that needs arguments says how to give them."""
    try:
        return cls()
    except TypeError as error:
        required = [
            name
            for name, parameter in inspect.signature(cls).parameters.items()
            if parameter.default is parameter.empty
            and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
        ]
        if not required:
            raise
        raise TypeError(
            f"{cls.__name__}() needs arguments ({', '.join(required)}): build it with a "
            'factory, factory = "module:build" under [tool.evalport] (build(cls) returns '
            "the evaluator)"
        ) from error


def evaluator_cases(
    cls: type[Evaluator], *, prefix: str = "", factory: Callable[[type], Any] | None = None
) -> list[Case]:
    """One case per dataset item of evaluator class ``cls``, built by ``factory(cls)``
    when given (a constructor with dependencies), else by ``cls()``."""
    if not (isinstance(cls, type) and issubclass(cls, Evaluator)):
        raise TypeError(f"{cls!r} is not an Evaluator subclass")
    instance = factory(cls) if factory is not None else _built(cls)
    if not isinstance(instance, cls):
        raise TypeError(f"the factory built {type(instance).__name__} for {cls.__name__}")
    spec = CaseSpec(dataset=instance.dataset())
    items = _Items(instance)
    if inspect.iscoroutinefunction(cls.run):

        async def item_case(ctx: Any, item: DatasetRow) -> None:
            await items.run_async(ctx, item)

    else:

        def item_case(ctx: Any, item: DatasetRow) -> None:  # type: ignore[misc]
            items.run_sync(ctx, item)

    item_case.__qualname__ = item_case.__name__ = cls.__name__
    dataset = dataset_of(spec, cls)
    if dataset is None:
        raise TypeError(f"{cls.__name__}.dataset() returned None; return rows or a path")
    doc = inspect.getdoc(cls)
    template = cls.description or (doc.splitlines()[0] if doc and cls.__doc__ else cls.__name__)
    source = source_of(cls.run)
    limit = None if cls.concurrency is None else ConcurrencyLimit(cls.concurrency)
    return [
        Case(
            id=f"{prefix}{cls.__name__}[{row.id}]",
            func=item_case,
            description=describe_row(template, row),
            tags=tuple(cls.tags),
            judge=cls.judge,
            timeout=cls.timeout,
            row=row,
            source=source,
            approval_policy=cls.approval_policy,
            concurrency=limit,
        )
        for row in dataset
    ]
