"""Store requests for the store tests (imported as ``storekit``): a new session and a
turn's finish with the defaults those tests share, each with a new run version."""

from __future__ import annotations

from evalport.server.stores import FinishTurn, NewSession, new_version


def new(
    session_id: str, meta: bytes = b"m", run: bytes = b"r", *, ttl: float = 10, limit: int = 5
) -> NewSession:
    """A session to create, its run of a new version."""
    return NewSession(session_id, meta, run, new_version(), ttl, limit)


def finish(
    session_id: str,
    token: str,
    *,
    state: str = "idle",
    ttl: float = 10,
    run: bytes = b"",
    append: bytes = b"",
    base: int = 0,
    key: str | None = None,
    record: bytes = b"",
    keep: int = 0,
) -> FinishTurn:
    """A turn's finish: ``run`` written whole (or ``append`` on ``base``) as a new version."""
    return FinishTurn(
        session_id,
        token,
        state,
        ttl,
        new_version(),
        run=run,
        append=append,
        base=base,
        key=key,
        record=record,
        keep=keep,
    )
