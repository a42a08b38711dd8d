"""run_delta and apply_delta: the cut, the reassembly, and a base that is not the delta's."""

from __future__ import annotations

import msgspec
import pytest
from evalport.protocol import (
    AgentRun,
    DeltaEnvelope,
    ErrorInfo,
    Event,
    Interrupt,
    PendingApproval,
    ProtocolError,
    RunDelta,
    RunStatus,
    Step,
    ToolExecution,
    Usage,
    UserPart,
    apply_delta,
    decode_answer,
    encode,
    run_delta,
    settled_turns,
)


def grown(
    turns: int, *, status: str = RunStatus.COMPLETED, parts_from: int | None = None
) -> AgentRun:
    """A run of ``turns`` turns, two steps each (the first with a tool), one event and
    one answered interrupt each; from turn ``parts_from`` on, each sent with a text and
    an inline image part."""
    run = AgentRun(session_id="s1", turns=turns, status=status, reply=f"reply {turns}")
    for turn in range(1, turns + 1):
        run.user_messages.append(f"message {turn}")
        run.interrupts.append(Interrupt(id=f"ask-{turn}", kind="choice", answer=turn, turn=turn))
        if parts_from is not None and turn >= parts_from:
            if run.user_parts is msgspec.UNSET:
                run.user_parts = []
            image = UserPart(turn=turn, type="image", media_type="image/png", data=bytes(500))
            run.user_parts += [UserPart(turn=turn, type="text", text=f"message {turn}"), image]
        run.steps.append(
            Step(
                id=f"step-{turn}-a",
                turn=turn,
                tool_executions=[ToolExecution(id=f"tool-{turn}", name="lookup", result=turn)],
                usage=Usage(input=10, output=turn),
            )
        )
        run.steps.append(Step(id=f"step-{turn}-b", turn=turn, index=1))
        run.events.append(Event(name="seen", turn=turn, data=turn))
    run.sync_tools()
    run.sync_usage()
    return run


def wire(delta: RunDelta) -> RunDelta:
    """The delta after a trip over the wire."""
    answer = decode_answer(encode(DeltaEnvelope(delta=delta)))
    assert isinstance(answer, RunDelta)
    return answer


@pytest.mark.parametrize("parts_from", [None, 1, 3])
@pytest.mark.parametrize("since", [0, 1, 3, 4])
def test_a_delta_over_its_base_is_the_run(since: int, parts_from: int | None) -> None:
    base, run = grown(since, parts_from=parts_from), grown(4, parts_from=parts_from)
    run.pending_approvals = [PendingApproval(call_id="c1", tool="refund", turn=4)]
    run.error_details = [ErrorInfo(message="earlier failure")]
    run.errors = "ValueError: earlier failure"
    delta = run_delta(run, since)
    assert [step.turn for step in delta.run.steps] == [t for t in range(since + 1, 5) for _ in "ab"]
    parts = {} if parts_from is None else {"userParts": 2 * max(since - parts_from + 1, 0)}
    assert delta.kept == {
        "steps": 2 * since,
        "tools": since,
        "events": since,
        "interrupts": since,
        "userMessages": since,
        **parts,
    }
    assert [ask.turn for ask in delta.run.interrupts] == list(range(since + 1, 5))
    rebuilt = apply_delta(base, wire(delta))
    assert rebuilt == run
    assert base == grown(since, parts_from=parts_from)  # the copy is left as it was


def test_a_delta_carries_only_the_new_turns_images() -> None:
    run = grown(10, parts_from=1)
    delta = encode(DeltaEnvelope(delta=run_delta(run, 9)))
    assert len(delta) * 5 < len(encode(run))
    assert [part.turn for part in run_delta(run, 9).run.user_parts or []] == [10, 10]


def test_every_field_that_is_not_a_tail_list_travels_whole() -> None:
    run = grown(3)
    delta = run_delta(run, 2)
    tails = {"steps", "tools", "events", "interrupts", "user_parts", "user_messages"}
    for field in msgspec.structs.fields(AgentRun):
        if field.name not in tails:
            assert getattr(delta.run, field.name) == getattr(run, field.name), field.name
    assert delta.run.usage == run.usage and delta.run.turns == 3


def test_the_cut_costs_what_the_tail_holds() -> None:
    run = grown(200)
    delta = run_delta(run, 199)
    assert len(encode(DeltaEnvelope(delta=delta))) * 50 < len(encode(run))


def test_settled_turns_leave_out_a_turn_that_is_not_over() -> None:
    assert settled_turns(AgentRun()) == 0
    assert settled_turns(grown(3)) == 3
    assert settled_turns(grown(3, status=RunStatus.FAILED)) == 3
    assert settled_turns(grown(3, status=RunStatus.STOPPED)) == 3
    assert settled_turns(grown(3, status=RunStatus.IN_PROGRESS)) == 2
    assert settled_turns(grown(3, status="paused-by-a-newer-server")) == 2


def test_a_suspended_turn_comes_again_whole() -> None:
    suspended = grown(2, status=RunStatus.IN_PROGRESS)
    suspended.steps.pop()  # the turn stopped after its first step
    later = grown(2)
    delta = run_delta(later, settled_turns(suspended))
    assert apply_delta(suspended, wire(delta)) == later


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda base: setattr(base, "session_id", "s2"), "session 's1'"),
        (lambda base: setattr(base, "turns", 1), "holds 1 turn"),
        (lambda base: base.steps.pop(0), "the copy holds 3"),
        (lambda base: setattr(base.steps[3], "id", "other"), "last kept step"),
        (lambda base: setattr(base.steps[3], "turn", 3), "are not those of turns 1-2"),
        (lambda base: base.steps.append(Step(id="x", turn=2)), "are not those of turns 1-2"),
    ],
)
def test_a_copy_that_is_not_the_base_is_refused(change: object, says: str) -> None:
    base = grown(2)
    assert callable(change)
    change(base)
    with pytest.raises(ProtocolError, match=says) as refused:
        apply_delta(base, run_delta(grown(3), 2))
    assert refused.value.path == "$.delta"
    assert "does not apply to this client's copy" in str(refused.value)


def test_a_kept_count_beyond_the_copy_is_refused() -> None:
    delta = run_delta(grown(3), 2)
    delta.kept["userMessages"] = 9
    with pytest.raises(ProtocolError, match="keeps 9 of userMessages"):
        apply_delta(grown(2), delta)


def test_a_tail_list_this_client_does_not_know_is_skipped() -> None:
    data = encode(DeltaEnvelope(delta=run_delta(grown(3), 2)))
    data = data.replace(b'"kept":{', b'"kept":{"futureList":4,')
    answer = decode_answer(data)
    assert isinstance(answer, RunDelta)
    assert apply_delta(grown(2), answer) == grown(3)


def test_a_since_outside_the_run_is_refused() -> None:
    with pytest.raises(ValueError, match="between 0 and the run's 2 turns"):
        run_delta(grown(2), 3)


def test_decode_answer_reads_whole_runs_too() -> None:
    run = grown(1)
    assert decode_answer(encode({"run": run})) == run
    assert decode_answer(encode(run)) == run
    with pytest.raises(ProtocolError, match="not a JSON object"):
        decode_answer(
            b'{"delta":{"since":0,"kept":{},"run":{"pendingApprovals":[{"arguments":"[1]"}]}}}'
        )
