"""Delta responses on the server: ``?since=N`` on a turn and on an attach.

The wire shape, the 422 problems for a bad ``since``, the whole run when ``since`` is past
the run, idempotent repeats cut at each repeat's ``since``, framework state and the
server's trace policy.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from evalport.protocol import (
    DELTA_CAPABILITY,
    AgentRun,
    RunDelta,
    TracePolicy,
    apply_delta,
    decode_answer,
    decode_run,
)
from evalport.protocol.runtime import FRAMEWORK_STATE, TurnContext
from serverkit import Build, echo_agent, open_session

SECRET = "SECRET-4111111111111111"


async def turn(
    client: httpx.AsyncClient, session: str, message: str, query: str = "", **headers: str
) -> httpx.Response:
    return await client.post(
        f"/evals/sessions/{session}/turns{query}", json={"message": message}, headers=headers
    )


async def full_run(client: httpx.AsyncClient, session: str) -> AgentRun:
    response = await client.get(f"/evals/sessions/{session}")
    assert response.status_code == 200
    return decode_run(response.content)


def delta_of(response: httpx.Response) -> RunDelta:
    assert response.status_code == 200, response.text
    answer = decode_answer(response.content)
    assert isinstance(answer, RunDelta), response.text[:200]
    return answer


async def test_health_lists_the_capability(client: httpx.AsyncClient) -> None:
    health = (await client.get("/health")).json()
    assert DELTA_CAPABILITY in health["capabilities"]


async def test_a_turn_with_since_sends_only_what_it_added(client: httpx.AsyncClient) -> None:
    session = await open_session(client)
    for message in ("one", "two", "three"):
        assert (await turn(client, session, message)).status_code == 200
    base = await full_run(client, session)
    response = await turn(client, session, "four", "?since=3")
    body = response.json()
    assert list(body) == ["delta"]
    delta = body["delta"]
    assert delta["since"] == 3
    assert delta["kept"] == {
        "steps": len(base.steps),
        "tools": 3,
        "events": 0,
        "interrupts": 0,
        "userMessages": 3,
    }
    assert delta["lastStepId"] == base.steps[-1].id
    assert {step["turn"] for step in delta["run"]["steps"]} == {4}
    assert [record["turn"] for record in delta["run"]["tools"]] == [4]
    assert delta["run"]["userMessages"] == ["four"]
    assert delta["run"]["turns"] == 4 and delta["run"]["reply"] == "four #4"
    after = await full_run(client, session)
    assert delta["run"]["usage"] == {
        "input": after.usage.input,
        "output": after.usage.output,
        "cacheWrite": 0,
        "cacheRead": 0,
        "reasoning": 0,
    }
    assert apply_delta(base, delta_of(response)) == after
    assert len(response.content) < len((await client.get(f"/evals/sessions/{session}")).content)


async def test_attach_with_since_polls_a_session(client: httpx.AsyncClient) -> None:
    session = await open_session(client)
    seen = decode_answer((await client.get(f"/evals/sessions/{session}?since=0")).content)
    assert isinstance(seen, RunDelta) and seen.run.turns == 0
    copy = apply_delta(AgentRun(session_id=session), seen)
    for message in ("one", "boom", "three"):
        await turn(client, session, message)
        polled = await client.get(f"/evals/sessions/{session}?since={copy.turns}")
        copy = apply_delta(copy, delta_of(polled))
        assert copy == await full_run(client, session)
    assert copy.status == "completed" and copy.error_details  # the failure of turn 2 kept
    # Nothing new: an empty delta that still carries the run's fields.
    idle = delta_of(await client.get(f"/evals/sessions/{session}?since=3"))
    assert idle.run.steps == [] and idle.run.reply == "three #2"


async def test_since_past_the_run_answers_the_whole_run(client: httpx.AsyncClient) -> None:
    session = await open_session(client)
    await turn(client, session, "one")
    attached = await client.get(f"/evals/sessions/{session}?since=5")
    assert list(attached.json()) == ["run"]
    answered = await turn(client, session, "two", "?since=9")
    assert list(answered.json()) == ["run"] and answered.json()["run"]["turns"] == 2


@pytest.mark.parametrize(
    "query",
    [
        "?since=",
        "?since=-1",
        "?since=1.5",
        "?since=x",
        "?since=1&since=2",
        "?since=%2B1",
        "?since=99999999999",
        "?since=" + "9" * 5000,  # past Python's limit on converting digits to an int
        "?since=" + "0" * 5000,
    ],
)
async def test_a_bad_since_is_a_422_and_runs_nothing(client: httpx.AsyncClient, query: str) -> None:
    session = await open_session(client)
    for response in (
        await turn(client, session, "one", query),
        await client.get(f"/evals/sessions/{session}{query}"),
    ):
        assert response.status_code == 422
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["type"] == "urn:evalport:problem:invalid-body"
        assert problem["errors"][0]["path"] == "query:since"
    assert (await full_run(client, session)).turns == 0


async def test_another_query_parameter_is_a_422(client: httpx.AsyncClient) -> None:
    """Query parameters are decoded as strictly as bodies."""
    session = await open_session(client)
    for response in (
        await turn(client, session, "one", "?view=full&since=0"),
        await client.get(f"/evals/sessions/{session}?view=full"),
    ):
        assert response.status_code == 422
        assert response.json()["errors"] == [{"path": "query:view", "message": "unknown"}]
    assert (await full_run(client, session)).turns == 0


async def test_a_repeated_key_answers_the_same_turn_at_each_since(
    client: httpx.AsyncClient,
) -> None:
    session = await open_session(client)
    await turn(client, session, "one")
    base = await full_run(client, session)
    first = await turn(client, session, "two", "?since=1", **{"Idempotency-Key": "k-2"})
    then = await client.get(f"/evals/sessions/{session}")
    again = await turn(client, session, "two", "?since=1", **{"Idempotency-Key": "k-2"})
    whole = await turn(client, session, "two", **{"Idempotency-Key": "k-2"})
    older = await turn(client, session, "two", "?since=0", **{"Idempotency-Key": "k-2"})
    assert again.content == first.content
    expected = decode_run(whole.content)
    assert expected.turns == 2 and expected.reply == "two #2"
    assert apply_delta(base, delta_of(first)) == expected
    assert apply_delta(AgentRun(session_id=session), delta_of(older)) == expected
    await turn(client, session, "three")  # the session moved on: the record still answers turn 2
    late = await turn(client, session, "two", "?since=1", **{"Idempotency-Key": "k-2"})
    assert late.content == first.content
    # the record keeps the delta; the whole run then is rebuilt from the stored run
    late_whole = await turn(client, session, "two", **{"Idempotency-Key": "k-2"})
    assert late_whole.content == whole.content == then.content
    late_older = await turn(client, session, "two", "?since=0", **{"Idempotency-Key": "k-2"})
    assert late_older.content == older.content


@pytest.mark.parametrize("policy", [None, TracePolicy.safe()])
async def test_a_late_repeat_rebuilds_the_run_with_framework_state_and_a_policy(
    build: Build, policy: TracePolicy | None
) -> None:
    """A keyed delta turn's record, answered whole after later turns appended to the
    stored run: the run as that turn left it, as sent (no framework state, redacted)."""
    _, client = build(Remembers, policy=policy)
    session = await open_session(client)
    for message in ("one", "two"):
        await turn(client, session, message)
    await turn(client, session, "three", "?since=2", **{"Idempotency-Key": "k-3"})
    then = await client.get(f"/evals/sessions/{session}")
    for message in ("four", "five", "six"):
        await turn(client, session, message, "?since=3")
    late = await turn(client, session, "three", **{"Idempotency-Key": "k-3"})
    assert late.content == then.content and FRAMEWORK_STATE.encode() not in late.content
    assert decode_run(late.content).turns == 3 and SECRET.encode() not in late.content


class Remembers:
    """Keeps its conversation in a ``FRAMEWORK_STATE`` event, as framework adapters do."""

    def __init__(self, info: object) -> None:
        self.said: list[str] = []

    async def turn(self, message: str, ctx: TurnContext) -> str:
        self.said.append(message)
        ctx.event("heard", {"count": len(self.said)})
        ctx.event(FRAMEWORK_STATE, {"said": [*self.said, SECRET]})
        return f"heard {len(self.said)}"


@pytest.mark.parametrize("policy", [None, TracePolicy.safe()])
async def test_framework_state_and_the_server_policy_hold_for_deltas(
    build: Build, policy: TracePolicy | None
) -> None:
    _, client = build(Remembers, policy=policy)
    session = await open_session(client)
    await turn(client, session, "one")
    base = await full_run(client, session)
    sent = await turn(client, session, "two", "?since=1")
    polled = await client.get(f"/evals/sessions/{session}?since=1")
    for response in (sent, polled):
        assert FRAMEWORK_STATE.encode() not in response.content
        delta = delta_of(response)
        assert [event.name for event in delta.run.events] == ["heard"]
        assert apply_delta(base, delta) == await full_run(client, session)
    # a since past the run answers the whole run, as sent: still without the state
    past = await client.get(f"/evals/sessions/{session}?since=3")
    answered = await turn(client, session, "three", "?since=9")
    for response in (past, answered):
        assert list(response.json()) == ["run"]
        assert FRAMEWORK_STATE.encode() not in response.content
        assert SECRET.encode() not in response.content


async def test_a_suspended_turn_is_sent_again_until_it_is_over(build: Build) -> None:
    async def asks(message: str, history: Any, ctx: TurnContext) -> str:
        decision = await ctx.request_approval("refund", {"card": SECRET})
        return f"approved={decision.approved}"

    _, client = build(asks, policy=TracePolicy.safe())
    session = await open_session(client)
    suspended = delta_of(await turn(client, session, "refund", "?since=0"))
    assert suspended.run.status == "in_progress" and suspended.run.pending_approvals
    copy = apply_delta(AgentRun(session_id=session), suspended)
    assert SECRET not in str(copy)
    [pending] = copy.pending_approvals
    decided = await client.post(
        f"/evals/sessions/{session}/approvals",
        json={"decisions": {pending.call_id: {"decision": "approve"}}},
    )
    assert decided.status_code == 200
    # The copy's last turn was not over: the client asks from the turn before it.
    polled = delta_of(await client.get(f"/evals/sessions/{session}?since=0"))
    assert polled.kept["steps"] == 0
    copy = apply_delta(copy, polled)
    assert copy == await full_run(client, session)
    assert copy.status == "completed" and not copy.pending_approvals


async def test_without_since_nothing_changes(build: Build) -> None:
    """The default stays the whole run, byte for byte as a 1.0 client reads it."""
    _, client = build(echo_agent)
    session = await open_session(client)
    response = await turn(client, session, "one")
    assert list(response.json()) == ["run"]
    assert response.content == (await client.get(f"/evals/sessions/{session}")).content
