"""Delta responses: a long session's run as what it gained since the client's copy.

Only this module knows how a delta is made (:func:`run_delta` cuts, :func:`apply_delta`
reassembles): a new tail list of the run is named here. Rules: see ARCHITECTURE.md,
"Delta responses".
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ._codec import _RunOrEnvelope, decode_response, normalized, whole_run
from ._messages import RunDelta
from ._models import AgentRun, RunStatus
from ._problems import ProtocolError

DELTA_CAPABILITY: Final = "delta"
"""The ``/health`` capability of a server that answers ``?since=N`` with a delta."""

# tail lists whose items name their turn
_BY_TURN: Final = ("steps", "tools", "events", "interrupts", "user_parts")
_BY_INDEX: Final = ("user_messages",)  # tail lists with one item per turn
_SETTLED: Final = frozenset((RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.FAILED))
TAIL_LISTS: Final = _BY_TURN + _BY_INDEX
"""The run's lists that grow only at their end, turn by turn (a delta carries their tail)."""
SETTLED_STATUSES: Final = _SETTLED
"""The statuses of a run whose latest turn is final (:func:`settled_turns`)."""
_WIRE_NAMES: Final = {field.name: field.encode_name for field in msgspec.structs.fields(AgentRun)}
_FIELD_NAMES: Final = {wire: name for name, wire in _WIRE_NAMES.items()}


def settled_turns(run: AgentRun) -> int:
    """The ``since`` of a client holding ``run``: the turns whose records are final."""
    if run.status in _SETTLED:
        return run.turns
    return max(run.turns - 1, 0)


def _kept_by_turn(items: list[Any], since: int) -> int:
    keep = len(items)
    while keep and items[keep - 1].turn > since:
        keep -= 1
    return keep


def run_delta(run: AgentRun, since: int) -> RunDelta:
    """What ``run`` gained after turn ``since`` (ARCHITECTURE.md, "Delta responses"); ``ValueError``
    when ``since`` is not between 0 and ``run.turns``. Costs what the tails hold."""
    if not 0 <= since <= run.turns:
        raise ValueError(f"since must be between 0 and the run's {run.turns} turns, not {since}")
    kept: dict[str, int] = {}
    tails: dict[str, list[Any]] = {}
    for name in _BY_TURN:
        items = getattr(run, name)
        if items is msgspec.UNSET:  # (user_parts of a run without parts: sent as absent)
            continue
        keep = kept[_WIRE_NAMES[name]] = _kept_by_turn(items, since)
        tails[name] = items[keep:]
    for name in _BY_INDEX:
        items = getattr(run, name)
        keep = kept[_WIRE_NAMES[name]] = min(since, len(items))
        tails[name] = items[keep:]
    steps = kept[_WIRE_NAMES["steps"]]
    return RunDelta(
        since=since,
        kept=kept,
        last_step_id=run.steps[steps - 1].id if steps else None,
        run=msgspec.structs.replace(run, **tails),
    )


def _items(run: AgentRun, name: str) -> list[Any]:
    """A tail list of ``run``; an unset one (``user_parts``) holds nothing."""
    items = getattr(run, name)
    return [] if items is msgspec.UNSET else items


def _mismatch(detail: str) -> ProtocolError:
    return ProtocolError(
        f"the delta does not apply to this client's copy of the run: {detail}", path="$.delta"
    )


def _check_base(base: AgentRun, delta: RunDelta) -> None:
    since = delta.since
    session = delta.run.session_id
    if base.session_id is not None and session is not None and base.session_id != session:
        raise _mismatch(f"it is of session {session!r}, the copy of {base.session_id!r}")
    if base.turns < since:
        raise _mismatch(f"it follows turn {since}, the copy holds {base.turns} turn(s)")
    for wire, keep in delta.kept.items():
        name = _FIELD_NAMES.get(wire)
        if name is None:
            continue  # a tail list this client does not know: its field is not decoded
        items = _items(base, name)
        if keep < 0 or keep > len(items):
            raise _mismatch(f"it keeps {keep} of {wire}, the copy holds {len(items)}")
        if name in _BY_TURN and (
            (keep and items[keep - 1].turn > since)
            or (keep < len(items) and items[keep].turn <= since)
        ):
            raise _mismatch(f"the copy's first {keep} {wire} are not those of turns 1-{since}")
    steps = delta.kept.get("steps", 0)
    last = base.steps[steps - 1].id if steps else None
    if last != delta.last_step_id:
        raise _mismatch(f"its last kept step is {delta.last_step_id!r}, the copy's {last!r}")


def apply_delta(base: AgentRun, delta: RunDelta, *, grow: bool = False) -> AgentRun:
    """The run ``delta`` describes, from ``base``, the client's copy (left unchanged, or
    with ``grow=True`` its tail lists grown in place); a :class:`ProtocolError` when
    ``base`` is not the delta's base (ARCHITECTURE.md, "Delta responses")."""
    _check_base(base, delta)
    lists: dict[str, list[Any]] = {}
    for wire, keep in delta.kept.items():
        name = _FIELD_NAMES.get(wire)
        if name is not None:
            kept = _items(base, name)
            merged = lists[name] = kept if grow and keep == len(kept) else kept[:keep]
            merged.extend(_items(delta.run, name))
    return msgspec.structs.replace(delta.run, **lists)


class _Answer(_RunOrEnvelope, kw_only=True, rename="camel", gc=False):
    """A whole run (bare or ``{"run": ...}``) or ``{"delta": ...}``: one decode pass."""

    delta: RunDelta | msgspec.UnsetType = msgspec.UNSET


def decode_answer(data: bytes) -> AgentRun | RunDelta:
    """Decode a turn or attach response leniently: the whole run, or a delta (whose
    ``run`` is made uniform as :func:`~evalport.protocol.decode_run` makes a run)."""
    decoded = decode_response(data, _Answer, what="run")
    if isinstance(decoded.delta, msgspec.UnsetType):
        return normalized(*whole_run(decoded), data)
    normalized(decoded.delta.run, "$.delta.run", data)
    return decoded.delta
