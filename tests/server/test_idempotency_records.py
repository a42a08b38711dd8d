"""Idempotency records as the store keeps them: MessagePack, raw bodies, bounded by the run."""

from __future__ import annotations

import pytest
from evalport.server._problems import HTTPProblem
from evalport.server._records import (
    Outcome,
    fingerprint,
    idempotency_record,
    replayed,
)
from evalport.server.stores import MemoryStore
from serverkit import Build, open_session

BODY = b'{"run":{"reply":"\xc3\xa9t\xc3\xa9"}}'


def test_a_record_replays_the_outcome_with_its_body_as_sent() -> None:
    stored = idempotency_record(fingerprint("hi"), Outcome(status=504, body=BODY))
    assert BODY in stored  # raw bytes, not base64
    assert replayed(stored, fingerprint("hi")) == Outcome(status=504, body=BODY)


def test_another_message_under_the_key_is_a_422() -> None:
    stored = idempotency_record(fingerprint("hi"), Outcome(status=200, body=BODY))
    with pytest.raises(HTTPProblem) as problem:
        replayed(stored, fingerprint("bye"))
    assert problem.value.status == 422


async def test_a_sessions_records_are_bounded_by_its_run_not_by_its_keys(build: Build) -> None:
    """Each keyed turn of a long run keeps what it added, not the whole run: 40 keys over
    a long run hold about the run once (they held it 41 times: 117 MB for a 2.9 MB run)."""
    store = MemoryStore()
    _, client = build(store=store)
    session = await open_session(client)
    url = f"/evals/sessions/{session}/turns"
    big = await client.post(url, json={"message": "x" * 400_000}, headers={"Idempotency-Key": "k0"})
    assert big.status_code == 200
    answers = {}
    for n in range(1, 41):
        key = f"k{n}"
        answers[key] = await client.post(
            url, json={"message": f"m{n}"}, headers={"Idempotency-Key": key}
        )
        assert answers[key].status_code == 200
    run = await store.read(session)
    assert run is not None
    records = [await store.get_result(session, f"k{n}") for n in range(41)]
    held = sum(len(record or b"") for record in records)
    assert held < 500_000 + len(run.run), held
    # a repeat still answers the turn as it was first answered: the run of that turn, whole
    for key in ("k1", "k20", "k40"):
        again = await client.post(
            url, json={"message": f"m{key[1:]}"}, headers={"Idempotency-Key": key}
        )
        assert again.status_code == 200
        assert again.content == answers[key].content
