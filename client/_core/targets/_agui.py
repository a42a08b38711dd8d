"""AgUiTarget: evaluate an agent that speaks AG-UI, with nothing of evalport on its side.

A session is an AG-UI thread held here; a run that started is never sent again. Rules:
see ARCHITECTURE.md, "The AG-UI target".
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import httpx
import msgspec
from evalport.protocol import (
    AgentRun,
    ContentPart,
    FaultsUnsupported,
    NotSuspended,
    ProblemType,
    ProtocolError,
    RequestRejected,
    RunStatus,
    SessionBusy,
    SessionNotFound,
    SessionSuspended,
    TargetUnavailable,
    ToolFault,
    TracePolicy,
    TurnRequest,
    __version__,
    require,
)
from evalport.protocol.runtime._content import user_parts
from httpx_sse import EventSource

from .._clients import PER_CLIENT, ClientSet, pool_limits, timeout_of, tls_context
from .._errors import Secrets, body_excerpt, error_for
from .._retry import RetryPolicy, parse_retry_after
from .._target import ClosingTarget, TargetIdentity, Turn
from .._turns import DecisionLike, SessionBase, TurnClock, decisions_of

if TYPE_CHECKING:
    from ag_ui.core import Message

    from ._agui_run import RunReader
    from ._agui_wire import Conversation

logger = logging.getLogger("evalport.client")

PROTOCOL: Final = "AG-UI"
EVENT_STREAM: Final = "text/event-stream"
AFTER_END: Final = 1.0  # seconds a stream may go on after its run's terminal event

LACKS: Final[Mapping[str, str]] = {
    "attach": "an AG-UI thread lives in the client that ran it: no call reads it back",
    "delete": "an AG-UI agent keeps no session for a client to delete",
    "deltas": "each AG-UI run sends the whole conversation and streams only its own events",
    "idempotent retries": "an AG-UI run has no idempotency key: a run that started is never "
    "sent again",
    "seeded faults": "AG-UI has no way to ask an agent to fail its tools",
    "server-side trace policy": "an AG-UI agent sends payloads as they are: the client's "
    "trace policy redacts every run",
}
"""What evalport's own protocol offers that AG-UI does not, and why (``evalport check``
and the docs say it per target)."""


class AgUiTarget(ClosingTarget):
    """An agent behind an AG-UI endpoint (see ARCHITECTURE.md, "The AG-UI target")."""

    kind: Final = "agui"
    protocol: Final = PROTOCOL
    lacks: Final = LACKS

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
        retry: RetryPolicy | None = None,
        name: str | None = None,
        version: str | None = None,
    ) -> None:
        # Imported here, so that evalport.client imports without the agui extra.
        purpose = "an AG-UI target (agui+ URL)"
        self._wire: Any = require("evalport.client._core.targets._agui_wire", "agui", purpose)
        self._run: Any = require("evalport.client._core.targets._agui_run", "agui", purpose)
        parsed = httpx.URL(url)
        clean = parsed.copy_with(username=None, password=None, fragment=None)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(
                f"an AG-UI endpoint must be an absolute http(s) URL such as "
                f"https://agent.example/agent, got {clean}"
            )
        self.url = str(clean)
        self.policy = policy if policy is not None else TracePolicy.safe()
        self.retry = retry if retry is not None else RetryPolicy()
        sent = httpx.Headers(
            {
                "Accept": EVENT_STREAM,
                "Content-Type": "application/json",
                "User-Agent": f"evalport/{__version__}",
            }
        )
        sent.update(dict(headers or {}))
        if token:
            sent["Authorization"] = (
                token if token.lower().startswith("bearer ") else f"Bearer {token}"
            )
        self.secrets = Secrets([token, parsed.password, *(headers or {}).values()])
        self.credentials = bool(token or headers)
        waits = timeout_of(timeout)
        self._clients = ClientSet(  # a partial of the static maker holds no `self`
            functools.partial(self._make_client, sent, waits, limits, transport),
            per_client=None if transport is not None else PER_CLIENT,
        )
        self._identity = TargetIdentity(
            kind=self.kind,
            location=self.url,
            agent_name=name or "agent",
            agent_version=version or "0",
        )
        self._sessions: set[str] = set()

    @staticmethod
    def _make_client(
        headers: httpx.Headers,
        timeout: httpx.Timeout,
        limits: httpx.Limits | None,
        transport: httpx.AsyncBaseTransport | None,
    ) -> httpx.AsyncClient:
        # Every client of this target: each run goes through its session's.
        return httpx.AsyncClient(
            headers=headers,
            timeout=timeout,
            limits=limits or pool_limits(),
            transport=transport,
            verify=tls_context(),
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"AgUiTarget({self.url!r}, policy={self.policy.describe()})"

    @property
    def base_url(self) -> str:
        """The endpoint's URL, without credentials."""
        return self.url

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
    ) -> AgUiSession:
        """A new AG-UI thread (nothing is sent until its first turn)."""
        if faults:
            raise FaultsUnsupported(
                f"{self.url}: {LACKS['seeded faults']}; run the case against the agent "
                "behind evalport's adapter (evalport serve --allow-faults) to inject faults"
            )
        thread_id = uuid.uuid4().hex
        self._sessions.add(thread_id)
        run = AgentRun(session_id=thread_id)
        client = self._clients.hold()  # the session's, until it closes
        conversation = self._wire.Conversation()
        return AgUiSession(self, thread_id, run, conversation=conversation, client=client)

    async def attach(self, session_id: str) -> AgUiSession:
        """Not supported by AG-UI (see ARCHITECTURE.md, "The AG-UI target")."""
        raise NotImplementedError(
            f"attach({session_id!r}): not supported by AG-UI targets; {LACKS['attach']}"
        )

    async def aclose(self) -> None:
        """Close the connection pools."""
        await self._clients.aclose()

    # -- what sessions use ---------------------------------------------------------------

    async def stream(
        self,
        body: bytes,
        reader: RunReader,
        clock: TurnClock,
        thread: str,
        via: httpx.AsyncClient,
    ) -> None:
        """POST one run through ``via`` (the session's client) and feed its events to
        ``reader`` until the stream ends (what is tried again: ARCHITECTURE.md, "The AG-UI
        target")."""
        if self._clients.closed:
            raise RuntimeError(
                f"cannot start an AG-UI run: this AgUiTarget ({self.url}) was closed "
                "(aclose() or the end of its `async with`); make a new one"
            )
        attempts = 0
        while True:
            attempts += 1
            try:
                refused = await self._attempt(body, reader, clock, thread, attempts, via)
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:  # never sent
                delay = self.retry.delay(attempts)
                if delay is None:
                    raise self._unavailable(error, thread, attempts) from None
                why = type(error).__name__
            except httpx.TransportError as error:
                raise self._unavailable(error, thread, attempts) from None
            else:
                if refused is None:
                    break
                wait = parse_retry_after(refused.headers.get("Retry-After"))
                delay = self.retry.delay(attempts, wait)
                if delay is None:
                    raise self._error(refused, thread, attempts)
                why = str(refused.status_code)
            logger.info("retrying the AG-UI run of thread %s in %.2fs after %s", thread, delay, why)
            await self.retry.sleep(delay)
        if reader.finished is None:
            raise TargetUnavailable(
                f"POST {self.url}: the AG-UI stream of thread {thread} ended before "
                "RUN_FINISHED or RUN_ERROR; the run was dropped (never retried: it has no "
                "idempotency key)"
            )

    async def _attempt(
        self,
        body: bytes,
        reader: RunReader,
        clock: TurnClock,
        thread: str,
        attempts: int,
        via: httpx.AsyncClient,
    ) -> httpx.Response | None:
        """One POST of the run: ``None`` once its stream was read, the answer when the
        agent refused to start it (429, 503); raises for any other answer."""
        decode, text_delta = self._wire.decode_event, self._wire.is_text_delta
        async with via.stream("POST", self.url, content=body) as response:
            if not response.is_success:
                await response.aread()
                if response.status_code in (429, 503):
                    return response
                raise self._error(response, thread, attempts)
            kind = response.headers.get("content-type", "")
            if not kind.startswith(EVENT_STREAM):
                await response.aread()
                raise ProtocolError(
                    self.secrets.scrub(
                        f"POST {self.url} answered {kind or 'no content type'} instead "
                        f"of an AG-UI event stream ({EVENT_STREAM}): is it the agent's "
                        "AG-UI endpoint?"
                    ),
                    status=response.status_code,
                    excerpt=self._excerpt(response.content),
                )
            # After the run's terminal event the stream is read to its end, so that the
            # connection is reused, but for AFTER_END at most: an agent that keeps it
            # open then has it closed.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None) as ending:
                    async for sent in EventSource(response).aiter_sse():
                        if reader.finished is not None or not sent.data:
                            continue
                        try:
                            event = decode(sent.data)
                        except ProtocolError as error:
                            raise ProtocolError(
                                self.secrets.scrub(f"POST {self.url}: {error}"),
                                path=error.path,
                                status=response.status_code,
                            ) from None
                        if event is None:
                            continue
                        clock.seen("text-delta" if text_delta(event) else event.type.value)
                        if reader.feed(event):
                            ending.reschedule(asyncio.get_running_loop().time() + AFTER_END)
        return None

    def _unavailable(self, error: Exception, thread: str, attempts: int) -> TargetUnavailable:
        return TargetUnavailable(
            self.secrets.scrub(
                f"POST {self.url} (AG-UI run of thread {thread}) failed after {attempts} "
                f"attempt(s): {type(error).__name__}: {error}"
            )
        )

    def _excerpt(self, body: bytes) -> str:
        return body_excerpt(body, self.secrets, verbatim=self.policy.verbatim_payloads)

    def _error(self, response: httpx.Response, thread: str, attempts: int) -> Exception:
        return error_for(
            method="POST",
            url=self.url,
            status=response.status_code,
            problem=None,
            excerpt=self._excerpt(response.content),
            location=response.headers.get("Location"),
            retry_after=response.headers.get("Retry-After"),
            session_id=thread,
            attempts=attempts,
            credentials=self.credentials,
            scrub=self.secrets.scrub,
        )

    def seen(self, run: AgentRun) -> AgentRun:
        """A copy of the session's verbatim ``run``, redacted by the trace policy."""
        return self.policy.apply(copy_run(run), in_place=True)


def copy_run(run: AgentRun) -> AgentRun:
    """A deep copy (the session's run grows in place; a turn keeps its own)."""
    return msgspec.json.decode(msgspec.json.encode(run), type=AgentRun)


class AgUiSession(SessionBase["AgUiTarget"]):
    """One AG-UI thread of an :class:`AgUiTarget`; ``run`` is the accumulated, redacted run,
    ``state`` the agent's state as its last run left it (verbatim)."""

    def __init__(
        self,
        target: AgUiTarget,
        thread_id: str,
        run: AgentRun,
        *,
        conversation: Conversation,
        client: httpx.AsyncClient,
    ) -> None:
        super().__init__(target, thread_id, run)
        self._client = client
        self._raw = copy_run(run)
        self._conversation = conversation
        self._busy = False

    @property
    def state(self) -> Any:
        """The agent's state (``STATE_SNAPSHOT`` and ``STATE_DELTA`` applied), or ``None``."""
        return self._conversation.state

    @property
    def messages(self) -> list[Message]:
        """The conversation as the next run will send it (AG-UI SDK messages)."""
        return list(self._conversation.messages)

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        """One user message as one AG-UI run; returns when the run finished or paused."""
        target = self._target
        content: tuple[ContentPart, ...] = ()
        text = message
        if parts:  # a turn's parts as the evalport protocol reads them (a bad one: 422)
            try:
                request = TurnRequest(message=message, parts=list(parts))
            except (TypeError, ValueError) as error:
                raise RequestRejected(
                    f"session {self._id!r}: {error}", problem_type=ProblemType.INVALID_BODY
                ) from None
            text, content = request.text(), tuple(request.content())
        self._usable()
        conversation = self._conversation
        if conversation.open:
            raise SessionSuspended(
                f"session {self._id!r} waits for decisions on {sorted(self._pending())}: "
                "answer them with decide() first (AG-UI agents refuse new input until then)",
                problem_type=ProblemType.SESSION_SUSPENDED,
            )
        work = copy_run(self._raw)
        work.turns += 1
        work.user_messages.append(text)
        if content:  # as the runtime records a turn's parts (absent from runs without)
            earlier = [] if work.user_parts is msgspec.UNSET else work.user_parts
            work.user_parts = [*earlier, *user_parts(work.turns, content)]
        work.status, work.reply = RunStatus.IN_PROGRESS, ""
        messages = [*conversation.messages, target._wire.user_message(text, content)]
        body = conversation.run_input(self._id, messages, None)
        reader = target._run.RunReader(work, conversation, messages)
        return await self._run_once(body, reader, text)

    async def decide(self, decisions: Mapping[str, DecisionLike]) -> Turn:
        """Answer every pending approval (call id -> decision) and interrupt (its id ->
        an ``answer`` decision) in one run that resumes the turn."""
        self._usable()
        conversation = self._conversation
        if not conversation.open:
            raise NotSuspended(
                f"session {self._id!r}: nothing waits for a decision",
                problem_type=ProblemType.NOT_SUSPENDED,
            )
        plain = decisions_of(decisions)
        pending = self._pending()
        if set(plain) != pending:
            raise RequestRejected(
                f"decisions for session {self._id!r} do not match its pending calls: "
                f"expected {sorted(pending)}, got {sorted(plain)} (AG-UI resumes every "
                "open interrupt at once)",
                problem_type=ProblemType.INVALID_BODY,
            )
        target = self._target
        work = copy_run(self._raw)
        target._wire.answered(work, plain)
        work.status = RunStatus.IN_PROGRESS
        resume = target._wire.resume_entries(conversation, plain)
        messages = list(conversation.messages)
        body = conversation.run_input(self._id, messages, resume)
        reader = target._run.RunReader(work, conversation, messages, decisions=plain)
        return await self._run_once(body, reader, None)

    async def refresh(self) -> AgentRun:
        """The accumulated run (an AG-UI agent has no call to read it again)."""
        self._usable()
        return self.run

    async def close(self) -> None:
        """Forget the thread (nothing to delete on the agent's side); twice is harmless."""
        self._target._sessions.discard(self._id)
        self._target._clients.release(self._client)  # (releasing twice is harmless)
        self.closed = True

    def _usable(self) -> None:
        if self.closed:
            raise SessionNotFound(
                f"session {self._id!r} was closed", problem_type=ProblemType.SESSION_NOT_FOUND
            )
        if self._busy:
            raise SessionBusy(
                f"session {self._id!r}: a turn is already running",
                problem_type=ProblemType.SESSION_BUSY,
            )

    def _pending(self) -> set[str]:
        """The ids a decision must name: the call id of each approval, the id of each
        other interrupt."""
        return {call or interrupt for interrupt, call in self._conversation.open.items()}

    async def _run_once(self, body: bytes, reader: RunReader, message: str | None) -> Turn:
        target = self._target
        clock = TurnClock()
        self._busy = True
        try:
            await target.stream(body, reader, clock, self._id, self._client)
        finally:
            self._busy = False
        reader.finish()
        self._raw = reader.run
        run = target.seen(reader.run)
        return self._advance(run, message, clock.timing(run.turns, bool(run.reply)))
