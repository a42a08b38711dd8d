"""HttpTarget: drive an agent through the evalport protocol over HTTP.

Every run is decoded leniently and redacted before anything sees it; the token goes only
to the base URL's origin. Rules: see ARCHITECTURE.md, "The HTTP target".
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

import httpx
from evalport.protocol import (
    CONTENT_PARTS_CAPABILITY,
    DELTA_CAPABILITY,
    PROTOCOL_VERSION,
    STREAMING_CAPABILITY,
    AgentRun,
    ApprovalsRequest,
    ContentPart,
    ContentPartsUnsupported,
    CreateSessionRequest,
    CreateSessionResponse,
    FaultsUnsupported,
    Health,
    ProblemType,
    ProtocolError,
    SessionNotFound,
    ToolFault,
    TracePolicy,
    TurnRequest,
    apply_delta,
    decode_answer,
    encode,
    settled_turns,
)
from evalport.protocol.runtime import as_faults
from msgspec import UNSET

from .._retry import RetryPolicy
from .._target import ClosingTarget, RunAt, TargetIdentity, Turn
from .._turns import DecisionLike, SessionBase, TurnClock, decisions_of
from ._channel import Channel

logger = logging.getLogger("evalport.client")

IDEMPOTENCY_CAPABILITY: Final = "idempotency"
FAULTS_CAPABILITY: Final = "faults"


class HttpTarget(ClosingTarget):
    """An agent behind the evalport protocol (or an Instructor-compatible endpoint)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        policy: TracePolicy | None = None,
        health_check: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy | None = None,
        limits: httpx.Limits | None = None,
        stream: bool = True,
    ) -> None:
        self._channel = Channel(
            base_url,
            token=token,
            headers=headers,
            timeout=timeout,
            policy=policy if policy is not None else TracePolicy.safe(),
            retry=retry if retry is not None else RetryPolicy(),
            transport=transport,
            limits=limits,
        )
        self.health_check = health_check
        self.health: Health | None = None
        self.stream = stream

    @property
    def base_url(self) -> str:
        """The base URL, normalized (trailing slash; no credentials, query or fragment)."""
        return self._channel.base_url

    @property
    def policy(self) -> TracePolicy:
        """The trace policy every run goes through before anyone sees it."""
        return self._channel.policy

    @property
    def retry(self) -> RetryPolicy:
        return self._channel.retry

    def __repr__(self) -> str:
        return f"HttpTarget({self.base_url!r}, policy={self.policy.describe()})"

    # -- the Target protocol ------------------------------------------------------------

    @property
    def identity(self) -> TargetIdentity:
        agent = self.health.agent if self.health is not None else None
        return TargetIdentity(
            kind="http",
            location=self.base_url,
            agent_name=agent.name if agent is not None else "agent",
            agent_version=agent.version if agent is not None else "0",
            tools=_declared(self.health),
        )

    @property
    def idempotent_turns(self) -> bool:
        """Whether turns may be retried: the server's health lists ``idempotency``."""
        return self.health is not None and IDEMPOTENCY_CAPABILITY in self.health.capabilities

    @property
    def delta_responses(self) -> bool:
        """Whether turns and refreshes ask for deltas: the server's health lists ``delta``."""
        return self.health is not None and DELTA_CAPABILITY in self.health.capabilities

    @property
    def streamed_turns(self) -> bool:
        """Whether turns ask for their events: ``stream`` is on and the server's health
        lists ``streaming`` (and ``idempotency``, to resume a stream)."""
        return (
            self.stream
            and self.idempotent_turns
            and (self.health is not None and STREAMING_CAPABILITY in self.health.capabilities)
        )

    async def check(self) -> Health:
        """``GET /health``: the protocol version must match; records the agent's identity."""
        channel = self._channel
        health = channel.health(await channel.request("GET", "health", mode="idempotent"))
        major = health.protocol.split(".", 1)[0]
        if major != PROTOCOL_VERSION:
            raise ProtocolError(
                f"{self.base_url}health speaks protocol {health.protocol!r}; this client "
                f"speaks {PROTOCOL_VERSION!r}: upgrade the side that is behind",
                path="$.protocol",
            )
        self.health = health
        return health

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> HttpSession:
        """Check health (once) and create a session (with ``faults``, see ARCHITECTURE.md,
        "The HTTP target")."""
        await self._ensure_checked()
        chosen = as_faults(faults)
        if chosen:
            await self._require_faults()
        body = encode(
            CreateSessionRequest(
                case_id=case_id,
                description=description,
                metadata=dict(metadata) if metadata is not None else None,
                faults=list(chosen) if chosen else UNSET,
            )
        )
        channel = self._channel
        client = channel.hold("POST /evals/sessions")  # the session's, until it closes
        try:
            response = await channel.request(
                "POST", "evals/sessions", body=body, mode="create", via=client
            )
            created = channel.decode(response, CreateSessionResponse, "session")
            if not created.session_id:
                raise ProtocolError(
                    "POST /evals/sessions answered an empty sessionId",
                    path="$.sessionId",
                    status=response.status_code,
                )
        except BaseException:
            channel.release(client)
            raise
        run = AgentRun(session_id=created.session_id)
        return HttpSession(
            self,
            created.session_id,
            run,
            channel=channel,
            client=client,
            expires_at=created.expires_at,
        )

    async def attach(self, session_id: str) -> HttpSession:
        """A session opened elsewhere (another process, another run), with its run so far."""
        if not session_id:
            raise ValueError("attach() needs the id of an existing session")
        await self._ensure_checked()
        run = AgentRun(session_id=session_id)
        channel = self._channel
        client = channel.hold(f"GET /evals/sessions/{session_id}")
        session = HttpSession(self, session_id, run, channel=channel, client=client)
        try:
            await session.refresh()
        except BaseException:
            channel.release(client)
            raise
        return session

    async def aclose(self) -> None:
        """Close the connection pool (sessions stay open on the server)."""
        await self._channel.aclose()

    # -- plumbing (HttpSession uses these) ------------------------------------------------

    async def _ensure_checked(self) -> None:
        if self.health_check and self.health is None:
            await self.check()

    async def _require_content_parts(self) -> None:
        health = self.health if self.health is not None else await self.check()
        if CONTENT_PARTS_CAPABILITY not in health.capabilities:
            raise ContentPartsUnsupported(
                f"{self.base_url} does not take images or files in a turn (its /health lists "
                f"no '{CONTENT_PARTS_CAPABILITY}' capability): upgrade its evalport server, "
                "or send the turn as text only",
                problem_type=ProblemType.CONTENT_PARTS_UNSUPPORTED,
            )

    async def _require_faults(self) -> None:
        health = self.health if self.health is not None else await self.check()
        if FAULTS_CAPABILITY not in health.capabilities:
            raise FaultsUnsupported(
                f"{self.base_url} does not accept tool faults (its /health lists no "
                f"'{FAULTS_CAPABILITY}' capability): start it with 'evalport serve "
                "--allow-faults' or build its adapter with EvalAdapter(..., faults=True)"
            )


class HttpSession(SessionBase["HttpTarget"]):
    """One session on an :class:`HttpTarget`; ``run`` is the accumulated, redacted run.

    Its target hands it the :class:`Channel` every call of the session goes through, and
    the channel's client it holds until it is closed."""

    def __init__(
        self,
        target: HttpTarget,
        session_id: str,
        run: AgentRun,
        *,
        channel: Channel,
        client: httpx.AsyncClient,
        expires_at: str | None = None,
    ) -> None:
        super().__init__(target, session_id, run)
        self._at = self._moment(run)
        self.expires_at = expires_at
        self._channel = channel
        self._client = client
        self._path = f"evals/sessions/{quote(session_id, safe='')}"

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        """One user message (and its content ``parts``, only to a server that lists the
        ``content-parts`` capability); returns when the agent finished the turn or
        suspended it."""
        request = TurnRequest(message=message, parts=list(parts) if parts else UNSET)
        if parts:
            await self._target._require_content_parts()
        since = self._since()
        path, body, key = f"{self._path}/turns{_query(since)}", encode(request), uuid.uuid4().hex
        clock = TurnClock()
        if self._target.streamed_turns:
            response = await self._channel.stream(
                path, body=body, key=key, session_id=self._id, seen=clock.seen, via=self._client
            )
        else:
            response = await self._channel.request(
                "POST",
                path,
                body=body,
                mode="keyed" if self._target.idempotent_turns else "once",
                headers={"Idempotency-Key": key},
                session_id=self._id,
                via=self._client,
            )
        at = await self._received(response, since)
        return self._advance(at, request.text(), clock.timing(at.head.turns, bool(at.head.reply)))

    async def decide(self, decisions: Mapping[str, DecisionLike]) -> Turn:
        """Answer the pending approvals (call id -> decision) and resume the turn."""
        body = encode(ApprovalsRequest(decisions=decisions_of(decisions)))
        response = await self._channel.request(
            "POST",
            f"{self._path}/approvals",
            body=body,
            mode="once",
            session_id=self._id,
            via=self._client,
        )
        return self._advance(self._moment(self._channel.run(response)), None)

    async def refresh(self) -> AgentRun:
        """Read the accumulated run again (what ``attach`` does); with delta responses,
        only what it gained since this session's run (polling a live session is cheap)."""
        since = self._since()
        response = await self._channel.request(
            "GET",
            f"{self._path}{_query(since)}",
            mode="idempotent",
            session_id=self._id,
            via=self._client,
        )
        self._at = await self._received(response, since)
        return self._at.run

    async def close(self) -> None:
        """Delete the session on the server; a session already gone counts as closed."""
        if self.closed:
            return
        try:
            with contextlib.suppress(SessionNotFound):
                await self._channel.request(
                    "DELETE", self._path, mode="idempotent", session_id=self._id, via=self._client
                )
        finally:
            self._channel.release(self._client)  # (releasing twice is harmless)
        self.closed = True

    def _moment(self, run: AgentRun) -> RunAt:
        """The moment of ``run``: one whose lists a delta may grow later when the server
        answers deltas (every run this session holds is then grown, never replaced)."""
        return RunAt.growing(run) if self._target.delta_responses else RunAt(run)

    def _since(self) -> int | None:
        """The ``since`` to ask with: ``None`` unless the server answers deltas."""
        return settled_turns(self._at.head) if self._target.delta_responses else None

    async def _received(self, response: httpx.Response, since: int | None) -> RunAt:
        """The run a turn or refresh answered, decoded and redacted: a whole run, or a
        delta reassembled over this session's run (a delta that does not fit it is
        logged, and the whole run read instead)."""
        channel = self._channel
        if since is None:
            return RunAt(channel.run(response))
        try:
            answer = decode_answer(response.content)
        except ProtocolError as error:
            raise channel.protocol_error(error, response) from None
        if isinstance(answer, AgentRun):  # the server chose the whole run
            return self._moment(channel.policy.apply(answer, in_place=True))
        answer.run = channel.policy.apply(answer.run, in_place=True)
        try:
            grow = self._at.counts is not None  # (a run held whole is never grown)
            return self._moment(apply_delta(self._at.head, answer, grow=grow))
        except ProtocolError as error:
            logger.warning("session %s: %s; reading the whole run", self._id, error)
        full = await channel.request(
            "GET", self._path, mode="idempotent", session_id=self._id, via=self._client
        )
        return self._moment(channel.run(full))


def _declared(health: Health | None) -> tuple[str, ...] | None:
    """The tools ``/health`` lists, or ``None`` when it lists none (or was not read)."""
    if health is None or health.tools is UNSET:
        return None
    return tuple(health.tools)


def _query(since: int | None) -> str:
    return "" if since is None else f"?since={since}"
