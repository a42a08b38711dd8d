"""The ``@tool`` decorator: every call of a tool function recorded in the current turn.

Outside a turn it is transparent. Rules: see ARCHITECTURE.md, "Recording a turn".
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, cast, overload

from ._context import current_context
from ._control import TurnControl

TOOL_ATTR = "__evalport_tool__"
"""Set on every ``@tool`` function (its tool name), so it is never taken for an agent."""
P = ParamSpec("P")
R = TypeVar("R")


def _bound_arguments(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {"args": list(args), **kwargs}
    bound.apply_defaults()
    return {
        key: value for key, value in bound.arguments.items() if key not in ("self", "cls", "ctx")
    }


Gate = bool | Callable[..., bool]


@overload
def tool(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def tool(
    *, name: str | None = None, approval: Gate = False
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None, /, *, name: str | None = None, approval: Gate = False
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Record every call of a tool function (sync or async) in the current turn.

    Arguments are recorded by parameter name, with defaults applied; the result or the
    error (which propagates) and the timings go into the execution. ``approval`` gates
    the tool: ``True`` always asks, a predicate receiving the call's arguments asks when it
    returns true. A gated tool must be async, or sync and called from a sync agent.
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        tool_name = name or function.__name__
        signature = inspect.signature(function)

        def needs_approval(arguments: dict[str, Any]) -> bool:
            if callable(approval):
                return bool(approval(**arguments))
            return approval

        if inspect.iscoroutinefunction(function):
            async_function = cast(Callable[P, Awaitable[Any]], function)

            @functools.wraps(function)
            async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                ctx = current_context()
                if ctx is None:
                    return await async_function(*args, **kwargs)
                arguments = _bound_arguments(signature, args, kwargs)
                approve = needs_approval(arguments)
                block = TurnControl(ctx).tool_block(tool_name, arguments, approval=approve)
                async with block as run:
                    if not run.execution.injected:  # a result fault skips the body
                        run.result = await async_function(*args, **kwargs)
                return run.result

            setattr(run_async, TOOL_ATTR, tool_name)
            return cast(Callable[P, R], run_async)

        @functools.wraps(function)
        def run_sync(*args: P.args, **kwargs: P.kwargs) -> R:
            ctx = current_context()
            if ctx is None:
                return function(*args, **kwargs)
            arguments = _bound_arguments(signature, args, kwargs)
            block = TurnControl(ctx).tool_block(tool_name, arguments)
            if needs_approval(arguments):
                block.gate_sync()
            with block as run:
                if not run.execution.injected:  # a result fault skips the body
                    run.result = function(*args, **kwargs)
            return cast(R, run.result)

        setattr(run_sync, TOOL_ATTR, tool_name)
        return run_sync

    if fn is not None:
        return decorate(fn)
    return decorate
