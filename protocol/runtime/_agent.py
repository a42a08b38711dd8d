"""The agent shapes (turn function, session factory, turn handler), decided here and only here.

Rules: see ARCHITECTURE.md, "Agent shapes".
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from .._messages import ToolFault
from .._models import AgentRun, Message, StepType
from ._context import TurnContext
from ._control import TurnControl
from ._outcomes import logger
from ._tools import TOOL_ATTR

_SHAPE_ATTR = "__evalport_shape__"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a session factory learns about a new session.

    ``faults`` are the tool faults the session was opened with; every turn's context
    injects them (see :mod:`evalport.protocol.runtime._faults`).
    """

    session_id: str
    case_id: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    faults: tuple[ToolFault, ...] = ()


@runtime_checkable
class TurnHandler(Protocol):
    """One session's agent: ``turn`` answers one user message (sync or async)."""

    def turn(self, message: str, ctx: TurnContext) -> Any: ...


TurnFunction: TypeAlias = Callable[[str, list[Message], TurnContext], Any]
SessionFactory: TypeAlias = Callable[[SessionInfo], Any]
InThread: TypeAlias = Callable[..., Awaitable[Any]]
"""Runs ``function(*args)`` in a worker thread and awaits its result."""


class AsyncTurnHandler:
    """A turn handler normalized to ``async turn(message, ctx) -> str``."""

    __slots__ = ("_async", "_restore", "_turn")

    def __init__(
        self,
        turn: Callable[[str, TurnContext], Any],
        restore: Callable[[list[Message], AgentRun], Any] | None = None,
        *,
        is_async: bool | None = None,
    ) -> None:
        self._turn = turn
        self._async = _is_async(turn) if is_async is None else is_async
        self._restore = restore

    async def restore(self, history: list[Message], run: AgentRun) -> None:
        """Call the handler's ``restore(history, run)`` hook, if it has one."""
        hook = self._restore
        if hook is None:
            return
        if _is_async(hook):
            await hook(history, run)
        else:
            done = await asyncio.to_thread(hook, history, run)
            if inspect.isawaitable(done):
                await done

    async def turn(self, message: str, ctx: TurnContext, in_thread: InThread | None = None) -> str:
        """The reply to ``message``; a sync ``turn`` runs in a worker thread, through
        ``in_thread`` if given (the session's pool), else :func:`asyncio.to_thread`."""
        if self._async:
            reply = self._turn(message, ctx)
            reply = await (_streamed(reply, ctx) if inspect.isasyncgen(reply) else reply)
        else:
            run = in_thread or asyncio.to_thread
            reply = await run(_call_in_context, self._turn, message, ctx)
            if inspect.isawaitable(reply):
                reply = await reply
        if reply is None:
            if not ctx.streamed:
                _replied_none(ctx)
            return ctx.streamed
        if not isinstance(reply, str):
            hint = (
                ": a session factory? annotate its parameter 'info: SessionInfo' or mark it "
                "with as_factory"
                if callable(getattr(reply, "turn", None))
                else ""
            )
            raise TypeError(f"the agent's turn returned {type(reply).__name__}, expected str{hint}")
        return reply


REPLIED_NONE = "reply.none"
"""The event of a turn whose agent returned ``None`` and streamed nothing."""


def _replied_none(ctx: TurnContext) -> None:
    """Say that the turn returned ``None`` and streamed nothing: a warning on the
    ``evalport.agent`` logger, and an event in the run (:data:`REPLIED_NONE`)."""
    hint = "its reply is empty; return the reply as a str (or yield its chunks)"
    logger.warning("turn %d: the agent returned None and streamed nothing: %s", ctx.turn, hint)
    ctx.event(REPLIED_NONE, {"hint": f"the agent returned None: {hint}"})


async def _streamed(chunks: AsyncIterator[Any], ctx: TurnContext) -> str:
    """Stream an async generator agent's chunks; the reply is their concatenation."""
    async for chunk in chunks:
        if not isinstance(chunk, str):
            raise TypeError(f"the agent yielded {type(chunk).__name__}; yield str chunks")
        ctx.text_delta(chunk)
    return ctx.streamed


def _call_in_context(
    turn: Callable[[str, TurnContext], Any], message: str, ctx: TurnContext
) -> Any:
    TurnControl(ctx).activate()
    return turn(message, ctx)


def _is_async(function: Callable[..., Any]) -> bool:
    call = getattr(function, "__call__", None)  # noqa: B004 - objects with async __call__
    return (
        inspect.iscoroutinefunction(function)
        or inspect.isasyncgenfunction(function)
        or (
            call is not None
            and (inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call))
        )
    )


def as_factory(function: Callable[[SessionInfo], Any]) -> Callable[[SessionInfo], Any]:
    """Mark ``function`` as a session factory (shape 1), whatever its signature."""
    setattr(function, _SHAPE_ATTR, "factory")
    return function


def as_turn_function(function: TurnFunction) -> TurnFunction:
    """Mark ``function`` as a turn function (shape 2), whatever its signature."""
    setattr(function, _SHAPE_ATTR, "function")
    return function


def _positionals(function: Callable[..., Any]) -> list[inspect.Parameter] | None:
    """The required positional parameters, or ``None`` when the signature cannot say."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    required: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return None
        if (
            parameter.kind
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            and parameter.default is inspect.Parameter.empty
        ):
            required.append(parameter)
    return required


SHAPES = (
    "async def agent(message), (message, history) or (message, history, ctx); a factory "
    "taking 'info: SessionInfo'; an object with a turn method; a framework agent"
)
"""The agent shapes accepted, as every entry point's error lists them."""


_TURN_ARGUMENTS = {"message": 1, "history": 2, "function": 3}
"""How many of ``(message, history, ctx)`` each turn-function shape takes."""


def _takes_info(parameter: inspect.Parameter) -> bool:
    annotation = parameter.annotation
    return annotation is SessionInfo or (
        isinstance(annotation, str) and annotation.rpartition(".")[2] == "SessionInfo"
    )


def _takes_context(parameter: inspect.Parameter) -> bool:
    """Whether a turn function's second parameter is meant for the turn context: named
    ``ctx`` or ``context``, or annotated ``TurnContext``."""
    annotation = parameter.annotation
    named = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return parameter.name in ("ctx", "context") or named.rpartition(".")[2] == "TurnContext"


def _shape(agent: object) -> str:
    """Which shape ``agent`` is, from its marks and signature (ARCHITECTURE.md, "Agent shapes")."""
    marked = getattr(agent, _SHAPE_ATTR, None)
    if isinstance(marked, str):
        return marked
    tool = getattr(agent, TOOL_ATTR, None)
    if tool is not None:
        raise TypeError(
            f"{_described(agent)} is the @tool {tool!r}, not an agent: pass the agent that "
            f"calls it; accepted: {SHAPES}"
        )
    if not inspect.isclass(agent) and callable(getattr(agent, "turn", None)):
        return "handler"
    if not callable(agent):
        raise TypeError(f"{_described(agent)} is not an agent; accepted: {SHAPES}")
    required = _positionals(agent)
    if required is not None and len(required) == 1:
        if inspect.isclass(agent) or _takes_info(required[0]):
            return "factory"
        return "message"
    if required is not None and len(required) == 2 and not inspect.isclass(agent):
        if _takes_context(required[1]):
            raise TypeError(
                f"{_described(agent)} takes (message, ctx), but a turn function's second "
                "argument is the history: write it (message, history, ctx); accepted: "
                f"{SHAPES}"
            )
        return "history"
    if required is not None and len(required) == 3 and not inspect.isclass(agent):
        return "function"
    found = "a signature it cannot read" if required is None else f"{len(required)} arguments"
    raise TypeError(
        f"cannot tell what {_described(agent)} is from its signature ({found}); accepted: "
        f"{SHAPES}; or mark it with evalport.protocol.runtime.as_factory or as_turn_function"
    )


def _described(value: object) -> str:
    """``value``'s repr when short, else its type (a framework object's repr can fill pages)."""
    text = repr(value)
    if len(text) <= 80:
        return text
    kind = type(value)
    return f"a {kind.__module__}.{kind.__qualname__} object"


def _adapt_handler(handler: object) -> AsyncTurnHandler:
    turn = getattr(handler, "turn", None)
    if not callable(turn):
        raise TypeError(f"the session factory returned {handler!r}, which has no turn method")
    restore = getattr(handler, "restore", None)
    return AsyncTurnHandler(turn, restore if callable(restore) else None)


def history_of(run: AgentRun) -> list[Message]:
    """The session's user and assistant messages, as a turn's ``ctx.history`` lists them.

    Each turn contributes its user message and, unless it failed, its reply: the text of
    the turn's last final-response step (the run's ``reply`` for the latest turn).
    """
    replies: dict[int, str] = {}
    for step in run.steps:
        if step.type != StepType.FINAL_RESPONSE or step.has_errors:
            continue
        for message in reversed(step.output_messages):
            if message.role == "assistant" and isinstance(message.content, str):
                replies[step.turn] = message.content
                break
        else:
            replies.setdefault(step.turn, "")
    if run.turns and run.turns in replies and run.status != "in_progress":
        replies[run.turns] = run.reply
    history: list[Message] = []
    for turn, text in enumerate(run.user_messages, start=1):
        history.append(Message(role="user", content=text))
        if turn in replies:
            history.append(Message(role="assistant", content=replies[turn]))
    return history


def session_factory(agent: object) -> Callable[[SessionInfo], Awaitable[AsyncTurnHandler]]:
    """Adapt any accepted agent shape into ``async (SessionInfo) -> AsyncTurnHandler``.

    Raises :class:`TypeError` at once (not at the first session) for anything else.
    """
    shape = _shape(agent)
    if shape == "handler":
        shared = _adapt_handler(agent)

        async def shared_handler(info: SessionInfo) -> AsyncTurnHandler:
            return shared

        return shared_handler

    function = agent
    assert callable(function)

    if shape in _TURN_ARGUMENTS:
        wanted = _TURN_ARGUMENTS[shape]

        def turn(message: str, ctx: TurnContext) -> Any:
            return function(*(message, list(ctx.history), ctx)[:wanted])

        # An async function's call returns its coroutine, which the handler awaits directly.
        handler = AsyncTurnHandler(turn, is_async=_is_async(function))

        async def per_function(info: SessionInfo) -> AsyncTurnHandler:
            return handler

        return per_function

    async def per_session(info: SessionInfo) -> AsyncTurnHandler:
        if _is_async(function):
            made = await function(info)
        else:
            made = function(info)
            if inspect.isawaitable(made):
                made = await made
        return _adapt_handler(made)

    return per_session


def declared_tools(agent: object) -> list[str] | None:
    """The names of the tools ``agent`` declares, sorted, or ``None`` when it declares none.

    An agent with a ``declared_tools()`` method (the framework adapters) says itself;
    otherwise the ``@tool`` functions it can reach are its declared tools: those of its
    class (a factory class or a handler's), and those of the module that defines it (a
    turn function's tools sit beside it). ``/health`` lists them; a client flags a case
    that names another tool."""
    method = getattr(agent, "declared_tools", None)
    if callable(method) and not inspect.isclass(agent):
        names = method()
        return sorted(set(names)) if names is not None else None
    owner = agent if inspect.isclass(agent) else type(agent)
    places: list[Mapping[str, Any]] = [vars(klass) for klass in inspect.getmro(owner)]
    module = sys.modules.get(getattr(agent, "__module__", None) or "")
    if module is not None:
        places.append(vars(module))
    found = {
        name
        for place in places
        for value in list(place.values())
        if isinstance(name := getattr(value, TOOL_ATTR, None), str)
    }
    return sorted(found) or None


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    """The agent's name and version, as ``/health`` and reports show them."""

    name: str
    version: str


def agent_identity(
    agent: object, name: str | None = None, version: str | None = None
) -> AgentIdentity:
    """``name``/``version`` if given, else the agent's own attributes, else its qualified name."""
    found_name = name or getattr(agent, "agent_name", None) or getattr(agent, "name", None)
    if not isinstance(found_name, str) or not found_name:
        found_name = getattr(agent, "__qualname__", None) or type(agent).__qualname__
    found_version = (
        version or getattr(agent, "agent_version", None) or getattr(agent, "version", None)
    )
    if not isinstance(found_version, str) or not found_version:
        found_version = "0"
    return AgentIdentity(name=str(found_name), version=found_version)
