"""A session's run after a turn: what the store, the client and the key's record get
(ARCHITECTURE.md, "The run's log"). A record keeps a delta, never the whole run.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import msgspec
from evalport.protocol import (
    AgentRun,
    DeltaEnvelope,
    RunEnvelope,
    apply_delta,
    encode,
    run_delta,
    settled_turns,
)
from evalport.protocol.runtime import without_framework_state

from ._records import RunPolicy, decode_envelope
from .stores import StoredSession

_decode_delta = msgspec.json.Decoder(DeltaEnvelope).decode

LOG_TURNS: Final = 64
"""The most turns a stored run's log holds before the run is written whole again."""


class Reached(msgspec.Struct, frozen=True, gc=False):
    """The stored run a live agent reached (see ARCHITECTURE.md, "The run's log"): its ``version``
    (0: none known), its settled turns (``since``), the bytes of its last whole write
    (``whole``) and of the turns appended since (``appended``, ``logged`` turns)."""

    # (a frozen Struct of ints, not a dataclass or a NamedTuple: made twice a turn, and
    # never tracked by the collector: every live session holds one, and a full collection
    # walks every tracked object; a NamedTuple, unlike a plain tuple, stays tracked)
    version: int
    since: int
    whole: int
    appended: int = 0
    logged: int = 0

    @classmethod
    def of(cls, stored: StoredSession, run: AgentRun) -> Reached:
        """What ``stored`` is, ``run`` the run it holds."""
        appended = sum(len(turn) for turn in stored.appended)
        since = settled_turns(run)
        return cls(stored.version, since, len(stored.run), appended, len(stored.appended))

    @property
    def size(self) -> int:
        """The stored bytes of the run."""
        return self.whole + self.appended


class Written(NamedTuple):
    """A turn's run as it goes out: to the store (``whole``, or the turn to ``append``),
    in the response (``sent``) and in the key's record (``recorded``)."""

    whole: bytes | None
    append: bytes
    sent: bytes
    recorded: bytes
    since: int  # the settled turns of the run written

    def as_whole(self, run: AgentRun, policy: RunPolicy | None) -> Written:
        """This, ``run`` written whole instead of appended (the store's run was not the
        one the turn was cut against)."""
        whole = self.whole if self.whole is not None else _whole(run, policy)
        return self._replace(whole=whole, append=b"")

    def reached(self, before: Reached, version: int) -> Reached:
        """What the store holds once this is written over ``before`` as ``version``."""
        if self.whole is not None:
            return Reached(version, self.since, len(self.whole))
        appended = before.appended + len(self.append)
        return Reached(version, self.since, before.whole, appended, before.logged + 1)


def _cut(run: AgentRun, since: int, policy: RunPolicy | None) -> bytes:
    delta = run_delta(run, since)
    if policy is not None:
        delta.run = policy.apply(delta.run)
    return encode(DeltaEnvelope(delta=delta))


def _whole(run: AgentRun, policy: RunPolicy | None) -> bytes:
    return encode(RunEnvelope(run=run if policy is None else policy.apply(run)))


def written(
    run: AgentRun,
    before: Reached,
    policy: RunPolicy | None,
    *,
    since: int | None,
    keyed: bool,
) -> Written:
    """The bodies of ``run`` after a turn over the stored run ``before`` (``since``: the
    request's; ``keyed``: whether it has a record to keep)."""
    base = before.since
    sent_run = without_framework_state(run)
    whole = None
    turn = b""
    if (
        not before.version  # (nothing known to append to)
        or since is None  # (the whole run is encoded for the response anyway)
        or before.logged >= LOG_TURNS
        or before.appended >= before.whole
    ):
        whole = _whole(run, policy)
    else:
        turn = _cut(run, base, policy)
    if since is None:
        sent = whole if whole is not None and sent_run is run else _whole(sent_run, policy)
        recorded = _cut(sent_run, base, policy) if keyed else sent
        return Written(whole, turn, sent, recorded, settled_turns(run))
    as_sent = turn if turn and sent_run is run else _cut(sent_run, base, policy)
    sent = as_sent if since == base else answer_body(sent_run, since, policy)
    return Written(whole, turn, sent, as_sent, settled_turns(run))


def answer_body(run: AgentRun, since: int | None, policy: RunPolicy | None) -> bytes:
    """``run`` as a client receives it (``run`` without framework state already): whole,
    or cut at ``since`` (whole when ``since`` is beyond its turns)."""
    if since is None or since > run.turns:
        return _whole(run, policy)
    return _cut(run, since, policy)


def stored_run(stored: StoredSession) -> AgentRun:
    """The run ``stored`` holds: its last whole write with the appended turns applied."""
    run = decode_envelope.decode(stored.run).run
    for turn in stored.appended:
        run = apply_delta(run, _decode_delta(turn).delta)
    return run


def recorded_since(body: bytes) -> int | None:
    """The ``since`` of a recorded 200 body that is a delta; ``None`` for a whole run."""
    if not body.startswith(b'{"delta"'):
        return None
    return _decode_delta(body).delta.since


def recorded_run(stored: StoredSession, body: bytes) -> AgentRun:
    """The run as sent when a delta ``body`` was recorded, rebuilt from ``stored``."""
    now = without_framework_state(stored_run(stored))
    return apply_delta(now, _decode_delta(body).delta)
