"""LocalTarget: the same agent, driven in-process through the server's agent interface.

Every run takes the path an HTTP run takes, so both targets hand out the same runs.
Rules: see ARCHITECTURE.md, "The local target".
"""

from __future__ import annotations

import os
import secrets
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from typing import Any, Final

from evalport.protocol import (
    AgentRun,
    ContentPart,
    ProblemType,
    RequestError,
    RequestRejected,
    RunEnvelope,
    SessionNotFound,
    TargetError,
    ToolFault,
    TracePolicy,
    TurnRequest,
    TurnTimedOut,
    decode_request,
    decode_run,
    encode,
)
from evalport.protocol.runtime import (
    AgentSession,
    DecisionError,
    NotSuspended,
    SessionBusy,
    SessionClosed,
    SessionInfo,
    SessionSuspended,
    agent_identity,
    as_faults,
    declared_tools,
    session_factory,
    without_framework_state,
)

from .._cache import files_fingerprint
from .._target import ClosingTarget, RunAt, TargetIdentity, Turn
from .._turns import DecisionLike, SessionBase, TurnClock, decisions_of


def _sources(agent: object) -> list[tuple[str, str]]:
    """The module files an agent's code lives in: its own module (a function's, a
    factory's) and its class's, outside evalport and installed packages."""
    kinds = [agent, type(agent), getattr(agent, "__wrapped__", None)]
    files = set()
    for kind in kinds:
        module = sys.modules.get(getattr(kind, "__module__", None) or "")
        path = getattr(module, "__file__", None)
        if path and not path.startswith(_NOT_AGENT_CODE):
            files.add(os.path.abspath(path))
    return [(os.path.basename(path), path) for path in sorted(files)]


_NOT_AGENT_CODE: Final = tuple(
    os.path.join(os.path.abspath(folder), "")
    for folder in (
        os.path.dirname(__file__),  # evalport's client package
        *{sysconfig.get_paths()[name] for name in ("stdlib", "purelib", "platlib")},
    )
)


def _declared(agent: object) -> tuple[str, ...] | None:
    """The tools the agent declares (as ``/health`` would list them), or ``None``."""
    names = declared_tools(agent)
    return None if names is None else tuple(names)


def _location(agent: object) -> str:
    kind = agent if callable(agent) and hasattr(agent, "__qualname__") else type(agent)
    return f"{getattr(kind, '__module__', '?')}:{getattr(kind, '__qualname__', repr(kind))}"


class LocalTarget(ClosingTarget):
    """An agent in this process, evaluated exactly as it would be over HTTP."""

    def __init__(
        self,
        agent: object,
        *,
        policy: TracePolicy | None = None,
        name: str | None = None,
        version: str | None = None,
        turn_timeout: float | None = None,
        location: str | None = None,
    ) -> None:
        # Fails at once (TypeError) for an object that is not an agent.
        self._factory = session_factory(agent)
        self.policy = policy if policy is not None else TracePolicy.safe()
        self.turn_timeout = turn_timeout
        found = agent_identity(agent, name, version)
        self._identity = TargetIdentity(
            kind="local",
            location=location or _location(agent),
            agent_name=found.name,
            agent_version=found.version,
            source=files_fingerprint(_sources(agent)),
            tools=_declared(agent),
        )
        self._sessions: dict[str, AgentSession] = {}

    def __repr__(self) -> str:
        return f"LocalTarget({self._identity.location!r}, policy={self.policy.describe()})"

    @property
    def identity(self) -> TargetIdentity:
        return self._identity

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> LocalSession:
        """Start a new session of the agent (with ``faults`` injected into its tools)."""
        session_id = secrets.token_urlsafe(24)
        info = SessionInfo(
            session_id=session_id,
            case_id=case_id,
            description=description,
            metadata=dict(metadata or {}),
            faults=as_faults(faults),
        )
        live = await AgentSession.from_factory(self._factory, info)
        self._sessions[session_id] = live
        run = AgentRun(session_id=session_id)
        return LocalSession(self, session_id, run, sessions=self._sessions)

    async def attach(self, session_id: str) -> LocalSession:
        """A session this target opened (possibly through another handle)."""
        live = _live(self._sessions, session_id)
        return LocalSession(self, session_id, self.seen(live.run), sessions=self._sessions)

    async def aclose(self) -> None:
        """Close every session still open (cancelling turns that still run)."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for live in sessions:
            await live.close()

    # -- what sessions use ---------------------------------------------------------------

    def seen(self, run: AgentRun) -> AgentRun:
        """``run`` as an HTTP client would see it: without framework state, encoded,
        decoded leniently, redacted."""
        sent = encode(RunEnvelope(run=without_framework_state(run)))
        return self.policy.apply(decode_run(sent), in_place=True)


def _live(sessions: Mapping[str, AgentSession], session_id: str) -> AgentSession:
    """The open session ``session_id`` of a target's ``sessions``."""
    live = sessions.get(session_id)
    if live is None:
        raise SessionNotFound(
            f"session {session_id!r} not found (never opened here, or closed)",
            problem_type=ProblemType.SESSION_NOT_FOUND,
        )
    return live


_RUNTIME_ERRORS = (
    SessionBusy,
    SessionSuspended,
    NotSuspended,
    SessionClosed,
    DecisionError,
    TurnTimedOut,
)
"""What a turn of the runtime raises that a target reports as HttpTarget would."""

# The problem type the server answers for each state the runtime refuses a call in.
_STATE_PROBLEMS: dict[type[TargetError], str] = {
    SessionBusy: ProblemType.SESSION_BUSY,
    SessionSuspended: ProblemType.SESSION_SUSPENDED,
    NotSuspended: ProblemType.NOT_SUSPENDED,
}


def _turn_error(session_id: str, error: Exception) -> TargetError:
    """The target error for one of :data:`_RUNTIME_ERRORS` (raised ``from None``): the same
    class for a session's state, with the session id and the problem type added."""
    if isinstance(error, SessionClosed):
        return SessionNotFound(
            f"session {session_id!r}: {error}",
            problem_type=ProblemType.SESSION_NOT_FOUND,
            detail=str(error),
        )
    if isinstance(error, DecisionError):
        return RequestRejected(
            f"decisions for session {session_id!r} do not match its pending calls: {error}",
            problem_type=ProblemType.INVALID_BODY,
            detail=str(error),
        )
    if isinstance(error, TurnTimedOut):
        return TurnTimedOut(
            f"session {session_id!r}: {error}; it was cancelled and recorded as failed, "
            "and the session is usable",
            problem_type=ProblemType.TURN_TIMEOUT,
            detail=str(error),
        )
    for kind, problem_type in _STATE_PROBLEMS.items():
        if isinstance(error, kind):
            text = f"session {session_id!r}: {error}"
            return kind(text, problem_type=problem_type, detail=str(error))
    raise TypeError(f"not an error of the runtime: {error!r}")


class LocalSession(SessionBase["LocalTarget"]):
    """One session of a :class:`LocalTarget`; ``run`` is the accumulated, redacted run.

    Its target hands it the map of open sessions it shares with the target (and with
    other handles of the same session)."""

    def __init__(
        self,
        target: LocalTarget,
        session_id: str,
        run: AgentRun,
        *,
        sessions: dict[str, AgentSession],
    ) -> None:
        super().__init__(target, session_id, run)
        self._sessions = sessions

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        """One user message (and its content ``parts``); returns when the agent finished
        the turn or suspended it."""
        target = self._target
        live = _live(self._sessions, self._id)
        if parts:  # the wire's path: base64 text becomes bytes, a bad part is a 422
            try:
                sent = encode(TurnRequest(message=message, parts=list(parts)))
                request = decode_request(sent, TurnRequest)
            except RequestError as error:
                raise RequestRejected(
                    f"session {self._id!r}: {error}",
                    problem_type=error.problem_type,
                    detail=str(error),
                ) from None
            parts = request.parts or ()
        clock = TurnClock()
        try:
            run = await live.start(
                message, parts=parts, timeout=target.turn_timeout, listen=clock.told
            )
        except _RUNTIME_ERRORS as error:
            raise _turn_error(self._id, error) from None
        text = TurnRequest(message=message, parts=list(parts)).text() if parts else message
        return self._advance(target.seen(run), text, clock.timing(run.turns, bool(run.reply)))

    async def decide(self, decisions: Mapping[str, DecisionLike]) -> Turn:
        """Answer the pending approvals (call id -> decision) and resume the turn."""
        target = self._target
        live = _live(self._sessions, self._id)
        plain = decisions_of(decisions)
        try:
            run = await live.decide(plain, timeout=target.turn_timeout)
        except _RUNTIME_ERRORS as error:
            raise _turn_error(self._id, error) from None
        return self._advance(target.seen(run), None)

    async def refresh(self) -> AgentRun:
        """The accumulated run as it stands now."""
        run = self._target.seen(_live(self._sessions, self._id).run)
        self._at = RunAt(run)
        return run

    async def close(self) -> None:
        """End the session (a running or suspended turn is cancelled); twice is harmless."""
        if not self.closed:
            live = self._sessions.pop(self._id, None)
            if live is not None:
                await live.close()
            self.closed = True
