"""A2ATarget: evaluate an agent that speaks A2A, nothing of evalport on its side.

What A2A does not carry is *not evaluable* on its runs; turns are never retried. Rules:
see ARCHITECTURE.md, "The A2A target".
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import httpx
import msgspec
from evalport.protocol import (
    AgentRun,
    ContentPart,
    ErrorInfo,
    FaultsUnsupported,
    Interrupt,
    NotSuspended,
    PendingInterrupt,
    ProblemType,
    RequestRejected,
    RunStatus,
    StopReason,
    StopSignal,
    TargetError,
    TextPart,
    ToolFault,
    TracePolicy,
    TurnRequest,
    require,
)
from evalport.protocol.runtime import utc_now
from evalport.protocol.runtime._content import user_parts
from msgspec import UNSET

from .._clients import PER_CLIENT, ClientSet, pool_limits, timeout_of, tls_context
from .._target import ClosingTarget, TargetIdentity, Turn
from .._turns import DecisionLike, SessionBase, TurnClock, decisions_of

if TYPE_CHECKING:
    from a2a.types import AgentCard

    from ._a2a_link import Link, Outcome

UNREPORTED: Final[Mapping[str, str]] = {
    "tools": "A2A agents do not report their tool calls",
    "steps": "A2A agents do not report their steps",
    "usage": "A2A agents do not report their token usage",
    "events": "A2A agents do not report events of their own",
}
"""What no A2A run carries, and why (:attr:`AgentRun.unreported`)."""

FAILED_STATES: Final = {
    "failed": "A2ATaskFailed",
    "rejected": "A2ATaskRejected",
    "canceled": "A2ATaskCanceled",
}
"""The task states that are the agent's failure, with the error type each records."""

INTERRUPTING_STATES: Final = ("input-required", "auth-required")

READ_SECONDS: Final = 300.0


class _OriginAuth(httpx.Auth):
    """The token and the caller's headers, on requests to one origin only."""

    def __init__(self, origin: str, token: str | None, headers: Mapping[str, str]) -> None:
        self.origin = origin
        self.headers = dict(headers)
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        url = request.url
        if f"{url.scheme}://{url.netloc.decode('ascii')}" == self.origin:
            request.headers.update(self.headers)
        yield request


def _clients(
    origin: str,
    *,
    token: str | None,
    headers: Mapping[str, str] | None,
    timeout: httpx.Timeout,
    limits: httpx.Limits | None,
    transport: httpx.AsyncBaseTransport | None,
) -> ClientSet:
    """The target's ``httpx.AsyncClient`` objects (every request goes through one)."""
    auth = _OriginAuth(origin, token, headers or {})

    def make() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            auth=auth,
            timeout=timeout,
            limits=limits or pool_limits(),
            transport=transport,
            verify=tls_context(),
            follow_redirects=False,
        )

    return ClientSet(make, per_client=None if transport is not None else PER_CLIENT)


class A2ATarget(ClosingTarget):
    """An agent behind the A2A protocol (see ARCHITECTURE.md, "The A2A target")."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        policy: TracePolicy | None = None,
        limits: httpx.Limits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        stream: bool = True,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an A2A agent's URL must be an absolute http(s) URL, not {url!r}")
        if parts.username or parts.password:
            raise ValueError("give an A2A agent's credentials with token=, not in its URL")
        link = require("evalport.client._core.targets._a2a_link", "a2a", "A2ATarget")
        self.url = url.rstrip("/")
        self.policy = policy if policy is not None else TracePolicy.safe()
        waits = timeout_of(timeout)
        self._clients = _clients(
            f"{parts.scheme}://{parts.netloc}",
            token=token,
            headers=headers,
            timeout=waits,
            limits=limits,
            transport=transport,
        )
        # How long a polled task may work: the read timeout (no limit set: 300 s).
        self.patience: float = waits.read if waits.read is not None else READ_SECONDS
        self._link: Link = link.Link(self.url, stream=stream)
        self.card: AgentCard | None = None  # once read (check)

    def __repr__(self) -> str:
        return f"A2ATarget({self.url!r}, policy={self.policy.describe()})"

    @property
    def identity(self) -> TargetIdentity:
        card = self.card
        return TargetIdentity(
            kind="a2a",
            location=self.url,
            agent_name=(card.name if card is not None else "") or "agent",
            agent_version=(card.version if card is not None else "") or "0",
        )

    async def check(self) -> AgentCard:
        """Read the agent card (its name and version become the identity); returns it."""
        async with self._clients.holding() as http:
            self.card = await self._link.read_card(http)
        return self.card

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> A2ASession:
        """Start a conversation (a new ``contextId``); nothing is sent until ``send``."""
        if faults:
            raise FaultsUnsupported(
                f"{self.url} is an A2A agent: evalport cannot inject tool faults into it "
                "(only agents behind evalport's adapter take them)"
            )
        if self.card is None:
            await self.check()
        context_id = str(uuid.uuid4())
        run = AgentRun(session_id=context_id, unreported=dict(UNREPORTED))
        http = self._clients.hold()  # the session's, until it closes
        return A2ASession(self, context_id, self.policy.apply(run, in_place=True), http)

    async def attach(self, session_id: str) -> A2ASession:
        raise NotImplementedError(
            f"A2ATarget cannot attach to {session_id!r}: an A2A agent keeps no conversation "
            "a client can read back (attach needs the evalport protocol, HttpTarget)"
        )

    async def aclose(self) -> None:
        """Close the SDK's clients and the connection pools."""
        try:
            await self._link.aclose()
        finally:
            await self._clients.aclose()


class A2ASession(SessionBase["A2ATarget"]):
    """One A2A conversation (its ``contextId``); ``run`` is what it recorded, redacted."""

    def __init__(
        self, target: A2ATarget, session_id: str, run: AgentRun, http: httpx.AsyncClient
    ) -> None:
        super().__init__(target, session_id, run)
        self._http = http
        self.context_id = session_id
        self.task_id: str | None = None  # the task that waits for the next message

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        """One user message (and its content ``parts``); returns when the task ended or
        waits for input."""
        request = TurnRequest(message=message, parts=list(parts) if parts else UNSET)
        content = request.content() or [TextPart(text=message)]
        text = request.text()
        parts_sent = self._target._link.message_parts(content)
        return await self._exchange(parts_sent, text, text, content if parts else ())

    async def decide(self, decisions: Mapping[str, DecisionLike]) -> Turn:
        """Answer the pending interrupt (its id -> ``{"decision": "answer", "answer": ...}``)
        with the next message of its task; resumes the same turn."""
        plain = decisions_of(decisions)
        pending = [asked.id for asked in self._at.head.pending_interrupts]
        if not pending:
            raise NotSuspended(
                f"session {self._id!r}: the A2A agent waits for no answer",
                problem_type=ProblemType.NOT_SUSPENDED,
            )
        answer = plain.get(pending[0])
        if set(plain) != set(pending) or answer is None or answer.decision != "answer":
            raise RequestRejected(
                f"session {self._id!r}: an A2A agent waits for one answer, to {pending[0]!r} "
                f"(decision 'answer'); got {sorted(plain)}",
                problem_type=ProblemType.INVALID_BODY,
            )
        parts = self._target._link.answer_parts(answer.answer)
        return await self._exchange(parts, None, answer.answer)

    async def refresh(self) -> AgentRun:
        """The run this session recorded (an A2A agent has none to read back)."""
        return self.run

    async def close(self) -> None:
        """End the conversation: a task still waiting for input is canceled (A2A has no
        call to end a conversation; an agent that cannot cancel is left as it is);
        twice is harmless."""
        if self.closed:
            return
        self.closed = True
        waiting, self.task_id = self.task_id, None
        try:
            if waiting is not None:
                with contextlib.suppress(TargetError):
                    await self._target._link.cancel(waiting, self._http)
        finally:
            self._target._clients.release(self._http)

    async def _exchange(
        self,
        parts: list[Any],
        message: str | None,
        answer: Any,
        content: Sequence[ContentPart] = (),
    ) -> Turn:
        """Send one message (a new turn's, or with ``message=None`` the answer that
        resumes the suspended turn) and record what it came to (and the turn's
        ``content`` parts, when it was sent with some)."""
        target = self._target
        clock = TurnClock()
        outcome = await target._link.exchange(
            parts,
            http=self._http,
            context_id=self.context_id,
            task_id=self.task_id,
            seen=clock.seen,
            patience=target.patience,
        )
        self.context_id = outcome.context_id or self.context_id
        waiting = outcome.state in INTERRUPTING_STATES
        self.task_id = outcome.task_id if waiting else None
        recorded = _recorded(self._at.head, message, answer, outcome, content)
        run = target.policy.apply(recorded, in_place=True)
        return self._advance(run, message, clock.timing(run.turns, bool(run.reply)))


def _recorded(
    before: AgentRun,
    message: str | None,
    answer: Any,
    outcome: Outcome,
    content: Sequence[ContentPart],
) -> AgentRun:
    """The run ``before`` with one exchange recorded (see ARCHITECTURE.md, "The A2A
    target"); its lists are new, so the runs of earlier turns never change."""
    now = utc_now()
    turns = before.turns + (1 if message is not None else 0)
    answered = [
        Interrupt(
            id=asked.id,
            kind=asked.kind,
            payload=asked.payload,
            answer=answer,
            turn=asked.turn,
            requested_at=asked.requested_at,
            answered_at=now,
        )
        for asked in before.pending_interrupts
    ]
    run = msgspec.structs.replace(
        before,
        turns=turns,
        user_messages=[*before.user_messages, *([message] if message is not None else [])],
        interrupts=[*before.interrupts, *answered],
        pending_interrupts=[],
        error_details=list(before.error_details),
        reply="",
    )
    if content:  # as the runtime records a turn's parts (absent from runs without)
        earlier = [] if before.user_parts is msgspec.UNSET else before.user_parts
        run.user_parts = [*earlier, *user_parts(turns, content)]
    state, text = outcome.state, outcome.text
    if state in INTERRUPTING_STATES:
        run.status = RunStatus.IN_PROGRESS
        run.stop_signal = None
        asked = PendingInterrupt(
            id=outcome.task_id or "", kind=state, payload=text, turn=turns, requested_at=now
        )
        run.pending_interrupts = [asked]
    elif state in FAILED_STATES:
        error = ErrorInfo(message=text or f"the A2A task ended {state}", type=FAILED_STATES[state])
        run.status = RunStatus.FAILED
        run.stop_signal = StopSignal(reason=StopReason.ERROR, message=error.message, source="a2a")
        run.error_details.append(error)
        line = f"{error.type}: {error.message}"
        run.errors = f"{run.errors}\n{line}" if run.errors else line
    else:
        run.status = RunStatus.COMPLETED
        run.reply = text
        run.stop_signal = StopSignal(reason=StopReason.COMPLETED, source="a2a")
    return run
