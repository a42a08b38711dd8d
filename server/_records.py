"""What the session manager keeps and answers besides runs: the outcome of a request,
idempotency records and keyed turns in flight, session metadata, and the problems the
session rules raise.

Rules:

- An :class:`Outcome` is a finished request's status and body; it is what an
  idempotency record replays and what a relayed approval brings back.
- An idempotency key is bound to the turn's message, or to its whole request when it has
  parts (:func:`fingerprint`); the same key with another one is a 422
  (:func:`key_reused`).
- Session ids carry 192 random bits (:func:`new_session_id`).
- A stored session's state is :data:`IDLE` or :data:`SUSPENDED` (waiting for approvals).
- A run leaves the service as ``{"run": ...}``, redacted by the adapter's
  :class:`RunPolicy` when it has one.
- Framework state stays in the service. A run is encoded once as the store keeps it
  (``stored``: redacted, with its :data:`~evalport.protocol.runtime.FRAMEWORK_STATE`
  events, which the policy leaves as they are, so that ``restore()`` reads them back on
  any replica) and, only when it holds such events, a second time as clients receive
  it (``sent``: the same run without them); otherwise both are one bytes object. Every
  body a client receives is a ``sent`` one: a turn's or a decision's response, hence
  the idempotency records (the response as first sent) and the answers relayed from
  another replica; attach re-encodes the stored run without the state
  (:func:`sent_body`) before any cut, so a delta or a whole run is always a sent one.
- A request with ``?since=N`` (:func:`since_of`) gets a 200's run as a delta
  (rules in :mod:`evalport.protocol._delta`), cut from the run as
  sent. A turn's own response is cut from the run object and its record keeps the
  whole body or the turn's delta (:mod:`._runlog`), so a repeated key answers the same
  turn cut at the repeat's ``since``; a whole body is decoded to be cut.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime
from typing import Any, Final, Protocol
from urllib.parse import parse_qs

import msgspec
from evalport.protocol import (
    AgentRun,
    CreateSessionRequest,
    FieldError,
    Problem,
    ProblemType,
    RunEnvelope,
    ToolFault,
    encode,
)
from evalport.protocol.runtime import (
    FRAMEWORK_STATE,
    AgentSession,
    DecisionError,
    SessionInfo,
    without_framework_state,
)

from ._problems import HTTPProblem

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


_MAX_SINCE: Final = 2**31 - 1


def query_of(query: bytes, known: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """A request's query parameters; 422 naming any not in ``known`` (query parameters
    are decoded as strictly as bodies)."""
    parameters = parse_qs(query.decode("latin-1"), keep_blank_values=True)
    unknown = sorted(parameters.keys() - known)
    if unknown:
        allowed = (
            f"the only one is {', '.join(sorted(known))}" if known else "this route takes none"
        )
        raise HTTPProblem(
            ProblemType.INVALID_BODY,
            f"Unknown query parameter {unknown[0]!r}; {allowed}.",
            errors=[FieldError(path=f"query:{name}", message="unknown") for name in unknown],
        )
    return parameters


def since_of(query: bytes) -> int | None:
    """The ``since`` of a request's query string (``None`` without one); 422 unless it
    is one whole number from 0, or when the query holds any other parameter."""
    if not query:
        return None
    values = query_of(query, frozenset({"since"})).get("since")
    if values is None:
        return None
    text = values[0]
    well_formed = text.isascii() and text.isdigit() and len(text) <= len(str(_MAX_SINCE))
    if len(values) > 1 or not well_formed or int(text) > _MAX_SINCE:
        raise HTTPProblem(
            ProblemType.INVALID_BODY,
            "The query parameter since must be given once, as the number of settled turns "
            f"of the client's copy of the run (0 to {_MAX_SINCE}).",
            errors=[FieldError(path="query:since", message="a whole number from 0, once")],
        )
    return int(text)


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


def not_found(session_id: str) -> HTTPProblem:
    return HTTPProblem(
        ProblemType.SESSION_NOT_FOUND,
        f"No live session {session_id!r}; it may have expired or been deleted.",
    )


def suspended(live: AgentSession) -> HTTPProblem:
    run = live.run
    ids = [approval.call_id for approval in run.pending_approvals]
    ids += [f"{asked.id} ({asked.kind})" for asked in run.pending_interrupts]
    return HTTPProblem(
        ProblemType.SESSION_SUSPENDED,
        f"The session waits for approval decisions or answers on {', '.join(ids)}; "
        "post them to its approvals first.",
    )


def key_reused() -> HTTPProblem:
    return HTTPProblem(
        ProblemType.IDEMPOTENCY_MISMATCH,
        "The Idempotency-Key was already used on this session with a different message.",
        errors=[FieldError(path="$.message", message="differs from the first use of this key")],
    )


def suspended_elsewhere() -> HTTPProblem:
    """409 ``session-suspended`` for a session suspended on another replica (or whose
    suspended turn this replica no longer holds)."""
    return HTTPProblem(
        ProblemType.SESSION_SUSPENDED,
        "The session waits for approval decisions on another replica; "
        "post them to that replica first.",
    )


def replayed(stored: bytes, digest: str) -> Outcome:
    """The outcome an idempotency record replays (422 if the key's message differs)."""
    record = decode_idempotency.decode(stored)
    if record.fingerprint != digest:
        raise key_reused()
    return Outcome(status=record.status, body=record.body)


def decision_problem(error: DecisionError) -> HTTPProblem:
    errors = (
        [
            FieldError(
                path=f"$.decisions[{json.dumps(call_id)}]", message="missing: this call is pending"
            )
            for call_id in error.missing
        ]
        + [
            FieldError(
                path=f"$.decisions[{json.dumps(call_id)}]", message="unknown: no such pending call"
            )
            for call_id in error.unknown
        ]
        + [
            FieldError(
                path=f"$.decisions[{json.dumps(key)}].decision",
                message="an interrupt takes 'answer', a tool call 'approve' or 'reject'",
            )
            for key in error.mismatched
        ]
    )
    return HTTPProblem(ProblemType.INVALID_BODY, str(error), errors=errors)
