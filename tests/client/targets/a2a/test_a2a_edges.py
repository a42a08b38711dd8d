"""A2ATarget's edge cases against a scripted A2A agent behind ``httpx.MockTransport``
(its answers written with a2a-sdk's own types): a card that cannot be read, a stream cut
short, failed/rejected/input-required tasks, artifacts instead of a message, a task
polled until it ends, and where the token goes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    Artifact,
    Message,
    Part,
    Role,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from evalport.client.targets import A2ATarget
from evalport.protocol import (
    AuthFailed,
    FilePart,
    ImagePart,
    ProtocolError,
    TargetUnavailable,
    TracePolicy,
)
from google.protobuf.json_format import MessageToDict

BASE = "http://agent.test"
TOKEN = "a2a-token-0123456789"


def card(*, streaming: bool, url: str = f"{BASE}/") -> dict[str, Any]:
    made = AgentCard(
        name="scripted",
        version="3.1",
        description="scripted",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=url, protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
    )
    return MessageToDict(made)


def agent_text(text: str) -> Message:
    return Message(role=Role.ROLE_AGENT, message_id="m", parts=[Part(text=text)])


def task(state: int, *, text: str = "", artifacts: tuple[str, ...] = ()) -> Task:
    status = TaskStatus(state=state, message=agent_text(text)) if text else TaskStatus(state=state)
    return Task(
        id="t1",
        context_id="c1",
        status=status,
        artifacts=[
            Artifact(artifact_id=f"a{i}", parts=[Part(text=chunk)])
            for i, chunk in enumerate(artifacts)
        ],
    )


def status(state: int, text: str = "") -> StreamResponse:
    event = TaskStatusUpdateEvent(
        task_id="t1", context_id="c1", status=task(state, text=text).status
    )
    return StreamResponse(status_update=event)


def chunk(text: str, *, append: bool) -> StreamResponse:
    artifact = Artifact(artifact_id="answer", parts=[Part(text=text)])
    event = TaskArtifactUpdateEvent(task_id="t1", context_id="c1", artifact=artifact, append=append)
    return StreamResponse(artifact_update=event)


class Agent:
    """A scripted A2A agent: its card, then one answer per JSON-RPC call, in order (a
    list of stream events for a streamed message, a Task or a SendMessageResponse)."""

    def __init__(self, card_body: Any, *answers: Any, card_status: int = 200) -> None:
        self.card_body, self.card_status = card_body, card_status
        self.answers = list(answers)
        self.calls: list[tuple[httpx.Request, dict[str, Any]]] = []
        self.cards: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/.well-known/agent-card.json"):
            self.cards.append(request)
            if self.card_status != 200:
                return httpx.Response(self.card_status, json={"error": "no"})
            return httpx.Response(200, json=self.card_body)
        body = json.loads(request.content)
        self.calls.append((request, body))
        answer = self.answers.pop(0)
        if isinstance(answer, list):  # a stream
            lines = [
                f"data: {json.dumps({'jsonrpc': '2.0', 'id': body['id'], 'result': MessageToDict(event)})}\n\n"
                for event in answer
            ]
            return httpx.Response(
                200, content="".join(lines), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(
            200, json={"jsonrpc": "2.0", "id": body["id"], "result": MessageToDict(answer)}
        )


def target(agent: Callable[[httpx.Request], httpx.Response], url: str = BASE) -> A2ATarget:
    return A2ATarget(
        url,
        token=TOKEN,
        policy=TracePolicy.verbatim(),
        transport=httpx.MockTransport(agent),
    )


@pytest.mark.parametrize(
    ("status_code", "error", "said"),
    [
        (404, ProtocolError, "404"),
        (401, AuthFailed, "credentials"),
        (503, TargetUnavailable, "503"),
    ],
)
async def test_a_card_that_cannot_be_read(status_code: int, error: type, said: str) -> None:
    agent = Agent(None, card_status=status_code)
    async with target(agent, f"{BASE}/agents/a") as a2a:
        with pytest.raises(error, match=said):
            await a2a.open()
    tried = [str(request.url) for request in agent.cards]
    # Not found under the path: the origin's card is asked next (RFC 8615's place).
    expected = [f"{BASE}/agents/a/.well-known/agent-card.json"]
    if status_code == 404:
        expected.append(f"{BASE}/.well-known/agent-card.json")
    assert tried == expected


async def test_a_card_that_is_not_json_and_an_agent_not_reached() -> None:
    def not_json(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>hello</html>")

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with target(not_json) as a2a:
        with pytest.raises(ProtocolError, match="agent card"):
            await a2a.check()
    async with target(down) as a2a:
        with pytest.raises(TargetUnavailable, match="connection refused"):
            await a2a.check()


async def test_a_stream_cut_short_is_a_transport_failure() -> None:
    agent = Agent(
        card(streaming=True),
        [
            StreamResponse(task=task(TaskState.TASK_STATE_SUBMITTED)),
            status(TaskState.TASK_STATE_WORKING),
        ],
    )
    async with target(agent) as a2a:
        session = await a2a.open()
        with pytest.raises(TargetUnavailable, match="last state: working"):
            await session.send("hi")
    assert agent.calls[0][1]["method"] == "SendStreamingMessage"


async def test_failed_and_rejected_tasks_are_the_agents_failure() -> None:
    agent = Agent(
        card(streaming=True),
        [
            status(TaskState.TASK_STATE_WORKING),
            status(TaskState.TASK_STATE_FAILED, "quota exceeded"),
        ],
        [status(TaskState.TASK_STATE_REJECTED)],
    )
    async with target(agent) as a2a:
        session = await a2a.open()
        failed = await session.send("hi")
        rejected = await session.send("again")
    assert failed.run.status == "failed" and failed.reply == ""
    assert failed.run.error_details[0].type == "A2ATaskFailed"
    assert failed.run.errors == "A2ATaskFailed: quota exceeded"
    assert rejected.run.error_details[-1].type == "A2ATaskRejected"
    assert rejected.run.error_details[-1].message == "the A2A task ended rejected"
    assert (failed.index, rejected.index) == (1, 2)


async def test_input_required_is_an_interrupt_answered_in_the_waiting_task() -> None:
    agent = Agent(
        card(streaming=True),
        [
            StreamResponse(task=task(TaskState.TASK_STATE_SUBMITTED)),
            status(TaskState.TASK_STATE_INPUT_REQUIRED, "Which city?"),
        ],
        [
            chunk("Sunny in ", append=False),
            chunk("Paris.", append=True),
            status(TaskState.TASK_STATE_COMPLETED),
        ],
    )
    async with target(agent) as a2a:
        session = await a2a.open()
        asked = await session.send("weather?")
        [pending] = asked.run.pending_interrupts
        assert (pending.id, pending.kind, pending.payload) == (
            "t1",
            "input-required",
            "Which city?",
        )
        assert asked.run.status == "in_progress"
        answered = await session.decide({pending.id: {"decision": "answer", "answer": "Paris"}})
    assert (answered.index, answered.message, answered.reply) == (1, "weather?", "Sunny in Paris.")
    [interrupt] = answered.run.interrupts
    assert interrupt.answer == "Paris" and not answered.run.pending_interrupts
    first, second = (body["params"]["message"] for _, body in agent.calls)
    assert "taskId" not in first and second["taskId"] == "t1"
    # The agent's contextId (c1) is the conversation's from its first answer on.
    assert first["contextId"] == session.id and second["contextId"] == "c1"
    assert second["parts"] == [{"text": "Paris"}]
    assert answered.timing is not None and answered.timing.first_token is not None


async def test_artifacts_instead_of_a_message_and_a_plain_message() -> None:
    agent = Agent(
        card(streaming=False),
        SendMessageResponse(
            task=task(TaskState.TASK_STATE_COMPLETED, text="done", artifacts=("part A", "part B"))
        ),
        SendMessageResponse(message=agent_text("just a message")),
    )
    async with target(agent) as a2a:
        session = await a2a.open()
        from_artifacts = await session.send("hi")
        from_message = await session.send("again")
    assert from_artifacts.reply == "part A\npart B"  # the output, not the status's "done"
    assert from_message.reply == "just a message" and from_message.run.status == "completed"
    assert from_artifacts.timing is not None and from_artifacts.timing.first_event is None
    assert [body["method"] for _, body in agent.calls] == ["SendMessage", "SendMessage"]


async def test_a_task_that_still_works_is_polled_until_it_ends() -> None:
    agent = Agent(
        card(streaming=False),
        SendMessageResponse(task=task(TaskState.TASK_STATE_SUBMITTED)),
        task(TaskState.TASK_STATE_WORKING),
        task(TaskState.TASK_STATE_COMPLETED, artifacts=("finally",)),
    )
    async with target(agent) as a2a:
        turn = await (await a2a.open()).send("slow one")
    assert turn.reply == "finally"
    assert [body["method"] for _, body in agent.calls] == ["SendMessage", "GetTask", "GetTask"]


async def test_requests_go_to_the_urls_origin_with_the_token() -> None:
    agent = Agent(
        card(streaming=False, url="http://localhost:8000/rpc"),
        SendMessageResponse(message=agent_text("hello")),
    )
    async with target(agent) as a2a:
        await a2a.check()
        assert (a2a.identity.kind, a2a.identity.agent_name, a2a.identity.agent_version) == (
            "a2a",
            "scripted",
            "3.1",
        )
        await (await a2a.open()).send("hi")
    [(request, _)] = agent.calls
    assert str(request.url) == f"{BASE}/rpc"  # the card's path, the URL's origin
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert agent.cards[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in repr(a2a)


async def test_a_turns_content_parts_go_as_a2a_parts_and_are_recorded() -> None:
    agent = Agent(card(streaming=False), SendMessageResponse(message=agent_text("a cat")))
    image = ImagePart(data=b"\x89PNG", media_type="image/png")
    document = FilePart(
        url="https://files.test/menu.pdf", media_type="application/pdf", name="menu.pdf"
    )
    async with target(agent) as a2a:
        turn = await (await a2a.open()).send("what is this?", parts=[image, document])
    [(_, body)] = agent.calls
    sent = body["params"]["message"]["parts"]
    assert sent[0] == {"text": "what is this?"}
    assert sent[1]["mediaType"] == "image/png" and "raw" in sent[1]
    assert sent[2] == {
        "url": "https://files.test/menu.pdf",
        "mediaType": "application/pdf",
        "filename": "menu.pdf",
    }
    assert [part.type for part in turn.run.user_parts] == ["text", "image", "file"]
    assert turn.run.user_parts[1].size == 4 and turn.message == "what is this?"


async def test_closing_cancels_a_task_still_waiting_for_input() -> None:
    agent = Agent(
        card(streaming=False),
        SendMessageResponse(task=task(TaskState.TASK_STATE_INPUT_REQUIRED, text="Which city?")),
        task(TaskState.TASK_STATE_CANCELED),
    )
    async with target(agent) as a2a:
        session = await a2a.open()
        await session.send("weather?")
        await session.close()
        await session.close()
    assert [body["method"] for _, body in agent.calls] == ["SendMessage", "CancelTask"]
    assert agent.calls[1][1]["params"]["id"] == "t1"


class _CutStream(httpx.AsyncByteStream):
    """One event of a stream, then the connection drops."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    async def __aiter__(self):  # type: ignore[override]
        yield self.first
        raise httpx.ReadError("connection reset by peer")


async def test_a_stream_the_network_cuts_is_a_transport_failure() -> None:
    def agent(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("agent-card.json"):
            return httpx.Response(200, json=card(streaming=True))
        rpc_id = json.loads(request.content)["id"]
        event = MessageToDict(StreamResponse(task=task(TaskState.TASK_STATE_WORKING)))
        first = f"data: {json.dumps({'jsonrpc': '2.0', 'id': rpc_id, 'result': event})}\n\n"
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_CutStream(first.encode())
        )

    async with target(agent) as a2a:
        session = await a2a.open()
        with pytest.raises(TargetUnavailable, match="connection reset"):
            await session.send("hi")
    assert session.run.turns == 0  # nothing recorded of a turn that did not end


async def test_auth_required_waits_as_an_interrupt_and_canceled_is_a_failure() -> None:
    agent = Agent(
        card(streaming=False),
        SendMessageResponse(task=task(TaskState.TASK_STATE_AUTH_REQUIRED, text="Sign in first")),
        SendMessageResponse(task=task(TaskState.TASK_STATE_CANCELED)),
    )
    async with target(agent) as a2a:
        session = await a2a.open()
        waiting = await session.send("my orders")
        canceled = await session.send("here is my code")
    [asked] = waiting.run.pending_interrupts
    assert (asked.kind, asked.payload, waiting.run.status) == (
        "auth-required",
        "Sign in first",
        "in_progress",
    )
    assert agent.calls[1][1]["params"]["message"]["taskId"] == "t1"  # the answer goes there
    assert canceled.run.status == "failed"
    assert canceled.run.error_details[-1].type == "A2ATaskCanceled"
    assert canceled.run.interrupts[0].answer == "here is my code"


@pytest.mark.parametrize(
    ("interface", "called"),
    [
        ("http://localhost:8000/", f"{BASE}/agents/a/"),  # the app does not know its mount
        ("http://public.test/agents/a/rpc", f"{BASE}/agents/a/rpc"),  # it does
        (f"{BASE}/elsewhere/rpc", f"{BASE}/elsewhere/rpc"),  # this origin: as the card says
    ],
)
async def test_an_agent_mounted_under_a_path(interface: str, called: str) -> None:
    agent = Agent(
        card(streaming=False, url=interface), SendMessageResponse(message=agent_text("hi"))
    )
    async with target(agent, f"{BASE}/agents/a") as a2a:
        await (await a2a.open()).send("hi")
    assert [str(request.url) for request in agent.cards] == [
        f"{BASE}/agents/a/.well-known/agent-card.json"
    ]
    assert [str(request.url) for request, _ in agent.calls] == [called]
