"""Idempotency records as the store keeps them: MessagePack, and earlier JSON ones still read."""

from __future__ import annotations

import pytest
from evalport.server._problems import HTTPProblem
from evalport.server._records import (
    Outcome,
    fingerprint,
    idempotency_record,
    replayed,
)

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
