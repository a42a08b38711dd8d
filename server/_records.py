"""What the server keeps and answers besides runs: a request's :class:`Outcome`, idempotency
records, session metadata and their codecs. Every body a client receives is a run as
sent, without framework state (ARCHITECTURE.md, "Sessions").
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import msgspec
from evalport.protocol import (
    AgentRun,
    CreateSessionRequest,
    Problem,
    RunEnvelope,
    ToolFault,
    encode,
)
from evalport.protocol.runtime import (
    FRAMEWORK_STATE,
    SessionInfo,
    without_framework_state,
)

from ._problems import key_reused

IDLE: Final = "idle"
SUSPENDED: Final = "suspended"


class RunPolicy(Protocol):
    """A trace policy, applied to every run before it leaves the service."""

    def apply(self, run: AgentRun) -> AgentRun: ...


def log_details(policy: RunPolicy | None) -> bool:
    """Whether logs may carry an agent's error messages and tracebacks: only when the
    adapter's runs are verbatim (no policy, or a verbatim one); else logs hold the error
    id and type, and the rest only at DEBUG on ``evalport.agent.details``."""
    return policy is None or getattr(policy, "verbatim_payloads", False) is True


_STATE_MARK: Final = encode(FRAMEWORK_STATE)  # the event's name as JSON text


def sent_body(stored: bytes) -> bytes:
    """A stored run's body as clients receive it: ``stored`` itself unless it holds
    framework state (only a body holding the event's name as JSON text is decoded)."""
    if _STATE_MARK not in stored:
        return stored
    run = decode_envelope.decode(stored).run
    sent = without_framework_state(run)
    return stored if sent is run else encode(RunEnvelope(run=sent))


class Outcome(msgspec.Struct, frozen=True, gc=False):
    """A finished request's answer: status and body (JSON or problem JSON)."""

    status: int
    body: bytes

    @property
    def is_problem(self) -> bool:
        return self.status >= 400


class IdempotencyRecord(msgspec.Struct, frozen=True, gc=False):
    fingerprint: str
    status: int
    body: bytes


class SessionMeta(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """What a session was created with, kept in the store so that another replica can
    rebuild its ``SessionInfo`` (``faults`` included: the fault plan is recomputed from
    them and the run, see :mod:`evalport.protocol.runtime._faults`)."""

    case_id: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: str = ""
    faults: list[ToolFault] | None = None


def session_info(session_id: str, made: CreateSessionRequest | SessionMeta) -> SessionInfo:
    """The agent's view of a session, from the request that created it or its stored meta."""
    return SessionInfo(
        session_id=session_id,
        case_id=made.case_id,
        description=made.description,
        metadata=made.metadata or {},
        faults=tuple(made.faults) if made.faults else (),
    )


encode_meta = msgspec.json.Encoder()
# MessagePack, not JSON: the body stays raw bytes (JSON would base64 it, several times slower).
decode_idempotency = msgspec.msgpack.Decoder(IdempotencyRecord)
_encode_record = msgspec.msgpack.Encoder().encode


def idempotency_record(fingerprint: str, outcome: Outcome) -> bytes:
    """A keyed request's answer as the store keeps it under the key."""
    return _encode_record(
        IdempotencyRecord(fingerprint=fingerprint, status=outcome.status, body=outcome.body)
    )


decode_meta = msgspec.json.Decoder(SessionMeta)
decode_envelope = msgspec.json.Decoder(RunEnvelope)
encode_relayed = msgspec.msgpack.Encoder()
decode_relayed = msgspec.msgpack.Decoder(Outcome)
decode_problem = msgspec.json.Decoder(Problem)


def new_session_id() -> str:
    """A session id: 192 random bits, URL-safe, never starting with ``-`` (so that it can
    follow an option on a command line: ``evalport run --attach ID``)."""
    while (session_id := secrets.token_urlsafe(24)).startswith("-"):
        pass
    return session_id


def iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fingerprint(message: str, request: bytes | None = None) -> str:
    """What an idempotency key is bound to: the turn's message, or its whole ``request``
    (JSON) when it has parts; each hashed under its own prefix, so that a message that
    spells a request's JSON is not that request."""
    bound = b"message\0" + message.encode() if request is None else b"parts\0" + request
    return hashlib.sha256(bound).hexdigest()


def replayed(stored: bytes, digest: str) -> Outcome:
    """The outcome an idempotency record replays (422 if the key's message differs)."""
    record = decode_idempotency.decode(stored)
    if record.fingerprint != digest:
        raise key_reused()
    return Outcome(status=record.status, body=record.body)
