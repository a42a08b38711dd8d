"""AgUiTarget's reading of AG-UI streams, over ``httpx.MockTransport``: what each event
becomes in the run, what the next run sends, and the streams it refuses."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest

pytest.importorskip("ag_ui.core")

from evalport.client import AgUiTarget
from evalport.client.assertions import EventSeen, TotalTokensAtMost
from evalport.protocol import (
    AuthFailed,
    FaultsUnsupported,
    ProtocolError,
    RunStatus,
    TargetUnavailable,
    ToolFault,
    TracePolicy,
)

URL = "http://agent.test/agent"
TOKEN = "tok-very-secret-123"


def frames(events: Sequence[dict[str, Any] | str]) -> bytes:
    """An SSE body: one ``data:`` frame per event (a ``str`` is sent as it is)."""
    return b"".join(
        f"data: {item if isinstance(item, str) else json.dumps(item)}\n\n".encode()
        for item in events
    )


def started() -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}


def finished(**fields: Any) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", **fields}


def text(message_id: str, *deltas: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": d} for d in deltas),
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def tool(call_id: str, name: str, args: str, result: str | None = None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args[:3]},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args[3:]},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]
    if result is not None:
        events.append(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": f"m-{call_id}",
                "toolCallId": call_id,
                "content": result,
            }
        )
    return events


USAGE = [{"model": "m", "inputTokens": 120, "outputTokens": 30, "cachedInputTokens": 20}]


class Agent:
    """A scripted AG-UI endpoint: each run answers the next body; keeps what was sent."""

    def __init__(self, *answers: bytes | Callable[[], httpx.Response]) -> None:
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(json.loads(request.content))
        self.headers.append(request.headers)
        answer = self.answers.pop(0)
        if callable(answer):
            return answer()
        return httpx.Response(200, content=answer, headers={"content-type": "text/event-stream"})

    def target(self, **options: Any) -> AgUiTarget:
        return AgUiTarget(URL, transport=httpx.MockTransport(self), **options)


async def test_a_run_with_a_tool_call_becomes_two_steps() -> None:
    agent = Agent(
        frames(
            [
                started(),
                *text("a1"),
                *tool("c1", "lookup", '{"order_id": "A1"}', '{"status": "shipped"}'),
                *text("a2", "Order ", "shipped."),
                finished(usage=USAGE),
            ]
        )
    )
    async with agent.target(policy=TracePolicy.verbatim(), token=TOKEN) as target:
        session = await target.open()
        turn = await session.send("where is A1?")
    run = turn.run
    assert run.status == RunStatus.COMPLETED and run.reply == "Order shipped."
    first, second = run.steps
    assert first.type == "tool_execution" and first.finish_reason == "tool_calls"
    assert first.requested_tool_calls[0].arguments == {"order_id": "A1"}
    assert first.tool_executions[0].result == {"status": "shipped"}
    assert second.type == "final_response" and second.finish_reason == "stop"
    # the run's usage on its last step, disjoint: 20 of the 120 input tokens were cached
    assert (run.usage.input, run.usage.cache_read, run.usage.output) == (100, 20, 30)
    assert run.llm_profile is not None and run.llm_profile.model == "m"
    body = agent.sent[0]
    assert body["threadId"] == session.id and body["runId"]
    assert body["tools"] == [] and body["context"] == []
    assert body["messages"] == [
        {"id": body["messages"][0]["id"], "role": "user", "content": "where is A1?"}
    ]
    assert agent.headers[0]["authorization"] == f"Bearer {TOKEN}"
    assert agent.headers[0]["accept"] == "text/event-stream"


async def test_the_next_run_sends_the_history_as_an_ag_ui_client_keeps_it() -> None:
    agent = Agent(
        frames(
            [started(), *tool("c1", "lookup", '{"id": 1}', "ok"), *text("a2", "done"), finished()]
        ),
        frames([started(), *text("a3", "again"), finished()]),
    )
    async with agent.target() as target:
        session = await target.open()
        await session.send("one")
        await session.send("two")
    history = agent.sent[1]["messages"]
    assert [message["role"] for message in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    call = history[1]["toolCalls"][0]
    assert call["id"] == "c1" and call["function"] == {"name": "lookup", "arguments": '{"id": 1}'}
    assert history[2] == {"id": "m-c1", "role": "tool", "toolCallId": "c1", "content": "ok"}
    assert history[3]["content"] == "done"


async def test_state_snapshots_and_deltas_make_the_state_the_next_run_sends() -> None:
    agent = Agent(
        frames(
            [
                started(),
                {"type": "STATE_SNAPSHOT", "snapshot": {"cart": [], "step": "start"}},
                {
                    "type": "STATE_DELTA",
                    "delta": [
                        {"op": "add", "path": "/cart/-", "value": "book"},
                        {"op": "replace", "path": "/step", "value": "checkout"},
                    ],
                },
                *text("a", "added"),
                finished(),
            ]
        ),
        frames([started(), *text("b", "ok"), finished()]),
    )
    async with agent.target() as target:
        session = await target.open()
        turn = await session.send("add a book")
        assert session.state == {"cart": ["book"], "step": "checkout"}
        second = await session.send("thanks")
    assert agent.sent[1]["state"] == {"cart": ["book"], "step": "checkout"}
    state = EventSeen("state", data={"step": "checkout"})
    assert state.evaluate(turn.run).passed
    assert [event.turn for event in second.run.events if event.name == "state"] == [1]


async def test_a_patch_that_does_not_apply_is_a_protocol_error() -> None:
    delta = {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/missing", "value": 1}]}
    agent = Agent(frames([started(), delta, finished()]))
    async with agent.target() as target:
        session = await target.open()
        with pytest.raises(ProtocolError, match="STATE_DELTA"):
            await session.send("hi")
        assert session.run.turns == 0


async def test_run_error_is_the_agents_failure() -> None:
    agent = Agent(
        frames(
            [
                started(),
                *text("a", "let me"),
                {"type": "RUN_ERROR", "message": "quota", "code": "429"},
            ]
        )
    )
    async with agent.target(policy=TracePolicy.verbatim()) as target:
        session = await target.open()
        turn = await session.send("hi")
    run = turn.run
    assert run.status == RunStatus.FAILED and run.reply == ""
    assert run.errors == "429: quota"
    assert run.error_details[0].type == "429" and run.steps[-1].type == "error"
    assert run.stop_signal is not None and run.stop_signal.reason == "error"


@pytest.mark.parametrize(
    "events",
    [
        [started(), *text("a", "half")],
        [],
    ],
    ids=["cut after text", "empty"],
)
async def test_a_stream_cut_before_the_runs_end_is_a_transport_failure(
    events: list[dict[str, Any]],
) -> None:
    agent = Agent(frames(events), frames([started(), *text("b", "whole"), finished()]))
    async with agent.target() as target:
        session = await target.open()
        with pytest.raises(TargetUnavailable, match="before RUN_FINISHED"):
            await session.send("hi")
        assert session.run.turns == 0 and session.messages == []
        turn = await session.send("hi again")  # the session is as it was
    assert turn.index == 1 and turn.reply == "whole"
    assert [m["content"] for m in agent.sent[1]["messages"]] == ["hi again"]


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        ("{not json", "not JSON"),
        (
            '{"type": "TEXT_MESSAGE_CONTENT", "messageId": "a"}',
            "TEXT_MESSAGE_CONTENT event does not validate: delta",
        ),
        ('{"delta": "x"}', "no string 'type'"),
    ],
    ids=["not json", "missing field", "no type"],
)
async def test_a_malformed_event_is_a_protocol_error(frame: str, match: str) -> None:
    agent = Agent(frames([started(), frame, finished()]))
    async with agent.target() as target:
        session = await target.open()
        with pytest.raises(ProtocolError, match=match):
            await session.send("hi")


async def test_an_event_of_a_newer_protocol_is_skipped() -> None:
    agent = Agent(
        frames([started(), {"type": "SOMETHING_NEW", "x": 1}, *text("a", "hi"), finished()])
    )
    async with agent.target() as target:
        turn = await (await target.open()).send("hi")
    assert turn.reply == "hi"


async def test_chunk_events_stand_for_whole_messages_and_calls() -> None:
    chunks = [
        started(),
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "role": "assistant", "delta": "Hel"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "delta": "lo"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "ping", "delta": '{"n":'},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "delta": " 2}"},
        finished(),
    ]
    async with Agent(frames(chunks)).target(policy=TracePolicy.verbatim()) as target:
        turn = await (await target.open()).send("hi")
    (step,) = turn.run.steps
    assert step.output_messages[0].content == "Hello"
    assert step.requested_tool_calls[0].arguments == {"n": 2}
    assert turn.timing is not None and turn.timing.first_token is not None


async def test_an_interrupt_without_a_tool_call_is_answered_through_resume() -> None:
    interrupt = {
        "id": "int-1",
        "reason": "input_required",
        "message": "Which size?",
        "responseSchema": {"type": "object"},
    }
    agent = Agent(
        frames([started(), finished(outcome={"type": "interrupt", "interrupts": [interrupt]})]),
        frames([started(), *text("a", "size M it is"), finished()]),
    )
    async with agent.target(policy=TracePolicy.verbatim()) as target:
        session = await target.open()
        asked = await session.send("buy a shirt")
        (pending,) = asked.run.pending_interrupts
        assert asked.run.status == RunStatus.IN_PROGRESS
        assert (pending.id, pending.kind) == ("int-1", "input_required")
        assert pending.payload["message"] == "Which size?"
        done = await session.decide({"int-1": {"decision": "answer", "answer": {"size": "M"}}})
    assert agent.sent[1]["resume"] == [
        {"interruptId": "int-1", "status": "resolved", "payload": {"size": "M"}}
    ]
    assert done.index == 1 and done.reply == "size M it is"
    assert done.run.pending_interrupts == [] and done.run.interrupts[0].answer == {"size": "M"}


async def test_an_approval_rejected_sends_approved_false_and_records_the_rejection() -> None:
    interrupt = {"id": "int-c1", "reason": "tool_call", "toolCallId": "c1"}
    agent = Agent(
        frames(
            [
                started(),
                *tool("c1", "refund", '{"amount": 30}'),
                finished(outcome={"type": "interrupt", "interrupts": [interrupt]}),
            ]
        ),
        frames(
            [
                started(),
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "m",
                    "toolCallId": "c1",
                    "content": "denied",
                },
                *text("a", "no refund"),
                finished(),
            ]
        ),
    )
    async with agent.target() as target:
        session = await target.open()
        asked = await session.send("refund")
        (pending,) = asked.run.pending_approvals
        assert (pending.call_id, pending.tool) == ("c1", "refund")
        done = await session.decide({"c1": ("reject", "too much")})
    assert agent.sent[1]["resume"] == [
        {
            "interruptId": "int-c1",
            "status": "resolved",
            "payload": {"approved": False, "reason": "too much"},
        }
    ]
    (execution,) = done.run.tools
    assert execution.approval is not None and execution.approval.state == "rejected"
    assert done.run.steps[0].tool_executions[0].has_error


async def test_a_refusal_before_the_stream_is_the_error_its_status_means() -> None:
    agent = Agent(lambda: httpx.Response(401, json={"detail": TOKEN}))
    async with agent.target(token=TOKEN) as target:
        session = await target.open()
        with pytest.raises(AuthFailed) as caught:
            await session.send("hi")
    assert TOKEN not in str(caught.value)


async def test_an_answer_that_is_not_an_event_stream_is_a_protocol_error() -> None:
    agent = Agent(lambda: httpx.Response(200, json={"hello": "world"}))
    async with agent.target() as target:
        session = await target.open()
        with pytest.raises(ProtocolError, match="instead of an AG-UI event stream"):
            await session.send("hi")


async def test_faults_are_refused_before_anything_is_sent() -> None:
    agent = Agent()
    async with agent.target() as target:
        with pytest.raises(FaultsUnsupported, match="AG-UI"):
            await target.open(faults=[ToolFault(tool="lookup", error="down")])
    assert agent.sent == []


async def test_content_parts_go_as_the_user_messages_ag_ui_parts() -> None:
    from evalport.protocol import FilePart, ImagePart

    agent = Agent(frames([started(), *text("a", "a cat"), finished()]))
    parts = [
        ImagePart(data=b"\x89PNG", media_type="image/png"),
        FilePart(url="https://files.test/a.pdf", media_type="application/pdf", name="a.pdf"),
    ]
    async with agent.target() as target:
        turn = await (await target.open()).send("what is this?", parts=parts)
    (sent,) = agent.sent[0]["messages"]
    assert sent["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "data", "value": "iVBORw==", "mimeType": "image/png"}},
        {
            "type": "document",
            "source": {
                "type": "url",
                "value": "https://files.test/a.pdf",
                "mimeType": "application/pdf",
            },
        },
    ]
    recorded = turn.run.user_parts
    assert [part.type for part in recorded] == ["text", "image", "file"]
    assert recorded[1].size == 4 and recorded[1].data is None  # the safe policy drops bytes
    assert turn.run.user_messages == ["what is this?"]


async def test_custom_events_and_framework_steps_are_run_events() -> None:
    events = [
        started(),
        {"type": "STEP_STARTED", "stepName": "agent"},
        {"type": "CUSTOM", "name": "escalated", "value": {"level": 2}},
        *text("a", "ok"),
        {"type": "STEP_FINISHED", "stepName": "agent"},
        finished(usage=USAGE),
    ]
    async with Agent(frames(events)).target() as target:
        turn = await (await target.open()).send("hi")
    names = [event.name for event in turn.run.events]
    assert names == ["step_started", "escalated", "step_finished"]
    assert TotalTokensAtMost(1_000).evaluate(turn.run).passed


async def test_arguments_only_in_the_messages_snapshot_are_the_calls_arguments() -> None:
    snapshot = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {"id": "u", "role": "user", "content": "hi"},
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "ping", "arguments": '{"n": 1}'},
                    }
                ],
            },
            {"id": "t", "role": "tool", "toolCallId": "c", "content": "pong"},
        ],
    }
    events = [
        started(),
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c",
            "toolCallName": "ping",
            "parentMessageId": "a",
        },
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TOOL_CALL_RESULT", "messageId": "t", "toolCallId": "c", "content": "pong"},
        snapshot,
        finished(),
    ]
    async with Agent(frames(events)).target(policy=TracePolicy.verbatim()) as target:
        session = await target.open()
        turn = await session.send("hi")
    (step,) = turn.run.steps
    assert step.requested_tool_calls[0].arguments == {"n": 1}
    assert step.tool_executions[0].arguments == {"n": 1}
    assert [message.id for message in session.messages] == ["u", "a", "t"]


async def test_a_stream_kept_open_after_the_runs_end_is_closed() -> None:
    import asyncio

    async def endless() -> Any:
        yield frames([started(), *text("a", "done"), finished()])
        await asyncio.Event().wait()  # an agent that never ends its response

    agent = Agent(
        lambda: httpx.Response(
            200, content=endless(), headers={"content-type": "text/event-stream"}
        )
    )
    async with agent.target() as target:
        turn = await (await target.open()).send("hi")
    assert turn.reply == "done" and turn.run.status == RunStatus.COMPLETED


async def test_a_run_the_agent_refused_to_start_is_tried_again() -> None:
    from evalport.client import RetryPolicy

    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    def refused() -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": "2"})

    def never_connected() -> httpx.Response:
        raise httpx.ConnectError("refused")

    agent = Agent(refused, never_connected, frames([started(), *text("a", "hi"), finished()]))
    retry = RetryPolicy(attempts=3, jitter=False, sleep=sleep)
    async with agent.target(retry=retry) as target:
        turn = await (await target.open()).send("hi")
    assert turn.reply == "hi" and len(agent.sent) == 3
    assert waits[0] == 2.0 and len(waits) == 2


async def test_a_run_cut_after_it_started_is_never_sent_again() -> None:
    def cut() -> httpx.Response:
        raise httpx.ReadError("reset")

    agent = Agent(cut)
    async with agent.target() as target:
        with pytest.raises(TargetUnavailable, match="ReadError"):
            await (await target.open()).send("hi")
    assert len(agent.sent) == 1
