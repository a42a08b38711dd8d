"""Cases: plain functions that receive an eval context, declared with ``@eval_case``
(which returns the function unchanged). Rules: see ARCHITECTURE.md, "Cases, datasets and
selection".
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeAlias, TypeVar, overload

from evalport.protocol import FilePart, ImagePart, TextPart, ToolFault
from evalport.protocol.runtime import as_faults

from ._conversation import ApprovalPolicy, InterruptPolicy, UserSimulator
from ._datasets import Dataset, DatasetRow
from ._logged import conversation_files

F = TypeVar("F", bound=Callable[..., Any])
ScriptedTurn: TypeAlias = str | list[Any]
"""A user turn as ``ctx.send`` takes it: a string, or a list of parts."""
MARK: Final = "__eval_case__"


@dataclass(frozen=True, slots=True)
class CaseSpec:
    """What ``@eval_case`` records on a function."""

    description: str | None = None
    tags: tuple[str, ...] = ()
    judge: Any = None
    timeout: float | None = None
    dataset: Dataset | Sequence[Mapping[str, Any]] | str | Path | None = None
    id: str | None = None
    approval_policy: ApprovalPolicy | None = None
    faults: tuple[ToolFault, ...] = ()
    messages: tuple[ScriptedTurn, ...] = ()
    user: UserSimulator | None = None
    interrupt_policy: InterruptPolicy | None = None
    conversations: str | None = None


class ConcurrencyLimit:
    """At most ``size`` trials at once of the cases that share it (an evaluator's
    ``concurrency``). The runner waits for a slot before a trial's timeout starts."""

    def __init__(self, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"concurrency must be a whole number of at least 1, got {size!r}")
        self.size = size
        self._semaphores: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Semaphore
        ] = weakref.WeakKeyDictionary()

    def slot(self) -> asyncio.Semaphore:
        """The semaphore of the running event loop (``async with limit.slot(): ...``)."""
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.size)
        return semaphore


@dataclass(frozen=True, slots=True)
class Case:
    """One runnable case (a dataset row of a function is a case of its own)."""

    id: str
    func: Callable[..., Any]
    description: str = ""
    tags: tuple[str, ...] = ()
    judge: Any = None
    timeout: float | None = None
    row: DatasetRow | None = None
    source: str = ""
    approval_policy: ApprovalPolicy | None = None
    faults: tuple[ToolFault, ...] = ()
    messages: tuple[ScriptedTurn, ...] = ()
    user: UserSimulator | None = None
    interrupt_policy: InterruptPolicy | None = None
    conversation: Path | None = None
    """The logged conversation file this case evaluates (``conversations=``)."""
    concurrency: ConcurrencyLimit | None = None
    """Shared by the cases of an evaluator with ``concurrency`` set: at most that many of
    their trials run at once."""

    @property
    def is_async(self) -> bool:
        """Whether the function is async (partials and async callables included)."""
        func: Any = self.func
        while isinstance(func, functools.partial):
            func = func.func
        if inspect.iscoroutinefunction(func):
            return True
        call = getattr(func, "__call__", None)  # noqa: B004 - an instance's async __call__
        return not inspect.isfunction(func) and inspect.iscoroutinefunction(call)

    def arguments(self, ctx: Any) -> tuple[Any, ...]:
        """The positional arguments for the case function."""
        return (ctx,) if self.row is None else (ctx, self.row)


@overload
def eval_case(func: F, /) -> F: ...


@overload
def eval_case(
    description: str | None = None,
    /,
    *,
    tags: Iterable[str] = (),
    judge: Any = None,
    timeout: float | None = None,
    dataset: Dataset | Sequence[Mapping[str, Any]] | str | Path | None = None,
    id: str | None = None,
    approval_policy: ApprovalPolicy | None = None,
    faults: Iterable[ToolFault | Mapping[str, Any]] | None = None,
    messages: Sequence[ScriptedTurn] | None = None,
    user: UserSimulator | None = None,
    interrupt_policy: InterruptPolicy | None = None,
    conversations: str | Path | None = None,
) -> Callable[[F], F]: ...


def eval_case(
    description: Any = None,
    /,
    *,
    tags: Iterable[str] = (),
    judge: Any = None,
    timeout: float | None = None,
    dataset: Dataset | Sequence[Mapping[str, Any]] | str | Path | None = None,
    id: str | None = None,
    approval_policy: ApprovalPolicy | None = None,
    faults: Iterable[ToolFault | Mapping[str, Any]] | None = None,
    messages: Sequence[ScriptedTurn] | None = None,
    user: UserSimulator | None = None,
    interrupt_policy: InterruptPolicy | None = None,
    conversations: str | Path | None = None,
) -> Any:
    """Mark a function as an eval case (see ARCHITECTURE.md, "Cases, datasets and selection")."""
    if callable(description):
        return eval_case()(description)
    if isinstance(tags, str):
        raise TypeError("tags takes a list of strings, e.g. tags=['smoke']")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    spec = CaseSpec(
        description=description,
        tags=tuple(tags),
        judge=judge,
        timeout=timeout,
        dataset=dataset,
        id=id,
        approval_policy=approval_policy,
        faults=as_faults(faults),
        messages=_scripted(messages),
        user=user,
        interrupt_policy=interrupt_policy,
        conversations=str(conversations) if conversations is not None else None,
    )

    def mark(func: F) -> F:
        if not callable(func):
            raise TypeError(f"@eval_case decorates a function, got {type(func).__name__}")
        if spec.messages and spec.user is not None:
            name = spec.id or getattr(func, "__qualname__", repr(func))
            raise ValueError(
                f"case {name!r} declares both scripted messages= and a simulated user=; "
                "a conversation is scripted or simulated, not both: keep one of them"
            )
        if spec.conversations is not None and (
            spec.messages or spec.user is not None or spec.dataset is not None
        ):
            name = spec.id or getattr(func, "__qualname__", repr(func))
            raise ValueError(
                f"case {name!r} evaluates logged conversations=, which already hold the "
                "conversation: drop messages=, user= and dataset="
            )
        _check_parameters(func, 1 if spec.dataset is None else 2)
        setattr(func, MARK, spec)
        return func

    return mark


def _check_parameters(func: Callable[..., Any], count: int) -> None:
    """A case takes ``(ctx)``, or ``(ctx, row)`` with a dataset: say so at once, at its
    ``def``, rather than as a call error in every trial."""
    try:
        inspect.signature(func).bind(*range(count))
    except ValueError:  # a signature Python cannot read: the call will tell
        return
    except TypeError:
        wanted = "(ctx)" if count == 1 else "(ctx, row)"
        name = getattr(func, "__qualname__", repr(func))
        row = ", row being a row of its dataset" if count == 2 else ""
        raise TypeError(
            f"case {name} at {source_of(func)} must take {wanted}{row}: write "
            f"'async def {getattr(func, '__name__', 'case')}{wanted}:'"
        ) from None


_PARTS: Final = (str, TextPart, ImagePart, FilePart)


def _scripted(messages: Sequence[ScriptedTurn] | None) -> tuple[ScriptedTurn, ...]:
    if messages is None:
        return ()
    if isinstance(messages, str):
        raise TypeError(
            "messages takes a list of strings (or of part lists), not one string, e.g. "
            "messages=['hi', 'refund A1']"
        )
    for item in messages:
        if isinstance(item, str):
            continue
        if isinstance(item, list | tuple) and all(isinstance(part, _PARTS) for part in item):
            continue
        raise TypeError(
            "messages takes a list of turns, each a string or a list of parts (str, "
            "TextPart, ImagePart, FilePart) as ctx.send takes, "
            f"not {type(item).__name__}"
        )
    return tuple(item if isinstance(item, str) else list(item) for item in messages)


def spec_of(func: Any) -> CaseSpec | None:
    spec = getattr(func, MARK, None)
    return spec if isinstance(spec, CaseSpec) else None


def source_of(func: Callable[..., Any]) -> str:
    """``file:line`` of a case function, from its code object (no source file is read:
    a function compiled from a string or a notebook has no readable source)."""
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is None:
        return str(getattr(func, "__qualname__", repr(func)))
    return f"{code.co_filename}:{code.co_firstlineno}"


def dataset_of(spec: CaseSpec, func: Callable[..., Any]) -> Dataset | None:
    data = spec.dataset
    if data is None or isinstance(data, Dataset):
        return data
    if isinstance(data, str | Path):
        path = Path(data)
        if not path.is_absolute():
            defined_in = inspect.getsourcefile(func)
            if defined_in:
                path = Path(defined_in).parent / path
        return Dataset.load(path)
    return Dataset.from_list(data, source=f"dataset of {func.__qualname__}")


def describe_row(template: str, row: DatasetRow | None) -> str:
    if row is None:
        return template
    try:
        return template.format_map(row.to_dict())
    except (KeyError, IndexError, ValueError, AttributeError):
        return template


def cases_from(func: Callable[..., Any], *, prefix: str = "") -> list[Case]:
    """The cases a marked function declares (one per dataset row)."""
    spec = spec_of(func)
    if spec is None:
        raise TypeError(f"{getattr(func, '__qualname__', func)!r} is not marked with @eval_case")
    name = spec.id or func.__name__
    doc = inspect.getdoc(func)
    template = spec.description or (doc.splitlines()[0] if doc else name)
    base = Case(
        id=prefix + name,
        func=func,
        description=template,
        tags=spec.tags,
        judge=spec.judge,
        timeout=spec.timeout,
        source=source_of(func),
        approval_policy=spec.approval_policy,
        interrupt_policy=spec.interrupt_policy,
        faults=spec.faults,
        messages=spec.messages,
        user=spec.user,
    )
    if spec.conversations is not None:
        return _conversation_cases(base, spec.conversations, func)
    dataset = dataset_of(spec, func)
    if dataset is None:
        return [base]
    return [
        Case(
            id=f"{base.id}[{row.id}]",
            func=func,
            description=describe_row(template, row),
            tags=base.tags,
            judge=base.judge,
            timeout=base.timeout,
            row=row,
            source=base.source,
            approval_policy=base.approval_policy,
            interrupt_policy=base.interrupt_policy,
            faults=base.faults,
            messages=base.messages,
            user=base.user,
        )
        for row in dataset
    ]


def _conversation_cases(base: Case, pattern: str, func: Callable[..., Any]) -> list[Case]:
    """One case per logged conversation file (:mod:`evalport.client._core._logged`)."""
    defined_in = inspect.getsourcefile(func)
    files = conversation_files(pattern, Path(defined_in).parent if defined_in else None)
    template = base.description
    return [
        dataclasses.replace(
            base,
            id=f"{base.id}[{name}]",
            description=(
                template.replace("{file}", name) if "{file}" in template else f"{template}: {name}"
            ),
            conversation=path,
        )
        for name, path in files
    ]
