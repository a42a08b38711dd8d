"""The A2A side of the A2A target, through the official ``a2a-sdk``: the agent card, one
message's exchange and what it ended in. The only module that imports ``a2a``; every
request goes to the origin of the URL given. Rules: see ARCHITECTURE.md, "The A2A
target".
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    A2AClientTimeoutError,
    AgentCardResolutionError,
    Client,
    ClientConfig,
    ClientFactory,
)
from a2a.helpers import get_message_text, get_text_parts, new_data_part, new_text_part
from a2a.types import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    InternalError,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskNotFoundError,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from evalport.protocol import (
    AuthFailed,
    ContentPart,
    FilePart,
    ProtocolError,
    RequestRejected,
    SessionNotFound,
    TargetError,
    TargetUnavailable,
    TextPart,
    TurnTimedOut,
)
from google.protobuf import json_format

CARD_PATH: Final = ".well-known/agent-card.json"

FINAL: Final = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
INTERRUPTED: Final = frozenset(
    {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
)

# GetTask while a sent task still works: from 50 ms, doubling, at most 1 s apart.
_POLL_FIRST, _POLL_MOST = 0.05, 1.0


def state_name(state: int) -> str:
    """The A2A name of a task state (``input-required``), as the spec writes it."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass(slots=True)
class Outcome:
    """What one message came to: the task's state (``completed`` for a plain message
    answer), the text it answered (the reply, the error or the question asked), and the
    ids to continue with."""

    state: str
    text: str
    context_id: str
    task_id: str | None


@dataclass(slots=True)
class _Reading:
    """The events of one exchange so far."""

    task_id: str | None = None
    context_id: str = ""
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    status_text: str = ""
    agent_text: str = ""  # the agent's last message in a task's history
    answer: str | None = None  # a plain message answer ends the exchange
    artifacts: dict[str, list[str]] = field(default_factory=dict)

    def take(self, event: StreamResponse) -> bool:
        """Read one event; whether it carried text of the answer (for first-token timing)."""
        kind = event.WhichOneof("payload")
        if kind == "message":
            self.context_id = event.message.context_id or self.context_id
            self.answer = get_message_text(event.message)
            return bool(self.answer)
        if kind == "task":
            self._task(event.task)
            return any(self.artifacts.values())
        if kind == "status_update":
            update = event.status_update
            self.task_id, self.context_id = update.task_id, update.context_id or self.context_id
            self.state = update.status.state
            self.status_text = get_message_text(update.status.message)
            return False
        if kind == "artifact_update":
            update = event.artifact_update
            self.task_id = update.task_id or self.task_id
            chunks = get_text_parts(update.artifact.parts)
            held = self.artifacts.setdefault(update.artifact.artifact_id, [])
            if not update.append:
                held.clear()
            held.extend(chunks)
            return bool(chunks)
        return False

    def _task(self, task: Task) -> None:
        self.task_id, self.context_id = task.id, task.context_id or self.context_id
        self.state = task.status.state
        self.status_text = get_message_text(task.status.message)
        if task.artifacts:  # a whole task (sent, or polled) holds every artifact whole
            self.artifacts = {
                artifact.artifact_id: get_text_parts(artifact.parts) for artifact in task.artifacts
            }
        agents = [message for message in task.history if message.role == Role.ROLE_AGENT]
        if agents:
            self.agent_text = get_message_text(agents[-1])

    @property
    def settled(self) -> bool:
        return self.answer is not None or self.state in FINAL or self.state in INTERRUPTED

    def outcome(self) -> Outcome:
        if self.answer is not None:
            return Outcome("completed", self.answer, self.context_id, None)
        artifacts = "\n".join("".join(chunks) for chunks in self.artifacts.values() if chunks)
        completed = self.state == TaskState.TASK_STATE_COMPLETED
        # The answer of a completed task is its output; anything else is what its status says.
        if completed:
            text = artifacts or self.status_text or self.agent_text
        else:
            text = self.status_text or (self.agent_text if self.state in INTERRUPTED else "")
        return Outcome(state_name(self.state), text, self.context_id, self.task_id)


def message_parts(content: Sequence[ContentPart]) -> list[Part]:
    """The A2A parts of a user's turn, in order: text as text, images and files inline
    as raw bytes or by URL."""
    made: list[Part] = []
    for part in content:
        if isinstance(part, TextPart):
            made.append(new_text_part(part.text))
            continue
        name = part.name if isinstance(part, FilePart) and isinstance(part.name, str) else ""
        media = part.media_type if isinstance(part.media_type, str) else ""
        if isinstance(part.data, bytes):
            made.append(Part(raw=part.data, media_type=media, filename=name))
        else:
            made.append(Part(url=str(part.url), media_type=media, filename=name))
    return made


def answer_parts(answer: Any) -> list[Part]:
    """An interrupt's answer as a message: text as text, any other JSON value as data."""
    return [new_text_part(answer) if isinstance(answer, str) else new_data_part(answer)]


@contextlib.contextmanager
def translated(where: str) -> Iterator[None]:
    """The SDK's errors as the exception tree's (see ARCHITECTURE.md, "The A2A target"),
    ``where`` naming the call (``the agent card of http://...``)."""
    try:
        yield
    except TargetError:
        raise
    except AgentCardResolutionError as error:
        if isinstance(error.__cause__, httpx.RequestError):
            raise TargetUnavailable(f"{where}: {error}") from None
        raise _by_status(error.status_code, where, error) from None
    except A2AClientTimeoutError as error:
        raise TargetUnavailable(f"{where}: no answer in time ({error})") from None
    except A2AClientError as error:
        cause = error.__cause__
        if isinstance(cause, httpx.HTTPStatusError):
            raise _by_status(cause.response.status_code, where, error) from None
        if isinstance(cause, httpx.RequestError):
            raise TargetUnavailable(f"{where}: {error}") from None
        raise ProtocolError(f"{where}: {error}") from None
    except TaskNotFoundError as error:
        raise SessionNotFound(f"{where}: the agent knows no such task ({error})") from None
    except InternalError as error:
        raise TargetUnavailable(f"{where}: the A2A server failed ({error})") from None
    except A2AError as error:
        raise RequestRejected(f"{where}: {type(error).__name__}: {error}") from None
    except json_format.ParseError as error:  # JSON the SDK's types do not take
        raise ProtocolError(f"{where}: the answer is not A2A's JSON: {error}") from None
    except httpx.TransportError as error:  # a stream cut by the network mid-way
        raise TargetUnavailable(f"{where}: {type(error).__name__}: {error}") from None


def _by_status(status: int | None, where: str, error: Exception) -> TargetError:
    if status in (401, 403):
        return AuthFailed(f"{where}: refused the credentials ({error})", status=status)
    if status is None:  # an answer that is not a card: JSON, or its structure
        return ProtocolError(f"{where}: {error}")
    if status == 429 or status >= 500:
        return TargetUnavailable(f"{where}: {error}", status=status)
    if status == 404:
        return ProtocolError(f"{where}: not found (HTTP 404): is this an A2A agent?", status=404)
    return RequestRejected(f"{where}: {error}", status=status)


class Link:
    """The SDK's clients for one agent: one over each of the target's ``httpx.AsyncClient``
    objects (a session's calls go through the one it holds)."""

    # What a message is made of, for the target that cannot import this module at its top.
    message_parts = staticmethod(message_parts)
    answer_parts = staticmethod(answer_parts)

    def __init__(self, url: str, *, stream: bool) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.stream = stream
        self.card: AgentCard | None = None
        self._clients: dict[httpx.AsyncClient, Client] = {}

    def _client(self, http: httpx.AsyncClient) -> Client:
        """The SDK's client over ``http``, made the first time it is asked for."""
        assert self.card is not None, "read_card() first"
        client = self._clients.get(http)
        if client is None:
            config = ClientConfig(
                streaming=self.stream,
                httpx_client=http,
                supported_protocol_bindings=[
                    TransportProtocol.JSONRPC,
                    TransportProtocol.HTTP_JSON,
                ],
            )
            try:
                client = ClientFactory(config).create(self.card)
            except ValueError as error:  # no binding the SDK speaks over HTTP
                raise ProtocolError(f"the agent card of {self.url}: {error}") from None
            self._clients[http] = client
        return client

    async def read_card(self, http: httpx.AsyncClient) -> AgentCard:
        """Read the agent card (see ARCHITECTURE.md, "The A2A target") through ``http``; an
        SDK client is then made for it (a card no binding of the SDK can use raises here)."""
        bases = [self.url] if self.url == self.origin else [self.url, self.origin]
        for base in bases:
            where = f"the agent card {base}/{CARD_PATH}"
            try:
                with translated(where):
                    card = await A2ACardResolver(http, base).get_agent_card()
                break
            except ProtocolError as error:
                if error.status != 404 or base == bases[-1]:
                    raise
        self._on_origin(card, base)
        self.card, self._clients = card, {}
        self._client(http)
        return card

    def _on_origin(self, card: AgentCard, base: str) -> None:
        """Point every interface of ``card`` (found under ``base``) at this link's origin
        (see ARCHITECTURE.md, "The A2A target"); a card that names none gets JSON-RPC at the
        URL given."""
        if not card.supported_interfaces:
            card.supported_interfaces.append(
                AgentInterface(url=self.url, protocol_binding=TransportProtocol.JSONRPC)
            )
            return
        mount = urlsplit(base).path.rstrip("/")  # "" for a card at the origin
        for interface in card.supported_interfaces:
            parts = urlsplit(interface.url)
            if f"{parts.scheme}://{parts.netloc}" == self.origin:
                continue
            path = parts.path if parts.path.startswith("/") else f"/{parts.path}"
            # An app mounted under a path rarely knows it: its card names its own routes.
            if mount and path != mount and not path.startswith(f"{mount}/"):
                path = f"{mount}{path}"
            query = f"?{parts.query}" if parts.query else ""
            interface.url = f"{self.origin}{path}{query}"

    @property
    def streams(self) -> bool:
        """Whether messages are streamed: the card says the agent streams, and the
        target allows it."""
        return self.stream and self.card is not None and self.card.capabilities.streaming

    async def exchange(
        self,
        parts: list[Part],
        *,
        http: httpx.AsyncClient,
        context_id: str,
        task_id: str | None,
        seen: Callable[[str], None],
        patience: float,
    ) -> Outcome:
        """Send one user message (in ``context_id``, continuing ``task_id`` when the agent
        waits on it) and read what it came to; ``seen`` hears each streamed event
        (``text-delta`` for one that carried text of the answer); every call goes
        through ``http``, the session's client."""
        client = self._client(http)
        message = Message(
            role=Role.ROLE_USER,
            parts=parts,
            message_id=uuid.uuid4().hex,
            context_id=context_id,
            task_id=task_id or "",
        )
        reading = _Reading(context_id=context_id)
        streams = self.streams
        where = f"the message to {self.url}"
        with translated(where):
            try:
                async for event in client.send_message(SendMessageRequest(message=message)):
                    carried = reading.take(event)
                    if streams:
                        seen("text-delta" if carried else "event")
            except InternalError as error:
                # a2a-sdk answers an agent's exception with an internal error and fails
                # the task: the task of this message says whether it was the agent.
                if not await self._find_task(client, reading, message.message_id):
                    raise
                await self._read_task(client, reading)
                if reading.state != TaskState.TASK_STATE_FAILED:
                    raise
                reading.status_text = reading.status_text or str(error)
            if not reading.settled and not streams and reading.task_id:
                await self._poll(client, reading, patience)
        if not reading.settled:
            last = state_name(reading.state) if reading.task_id else "no task yet"
            raise TargetUnavailable(
                f"{where}: the answer ended before the task did (last state: {last})"
            )
        return reading.outcome()

    async def _poll(self, client: Client, reading: _Reading, patience: float) -> None:
        """``GetTask`` until the task settles, for at most ``patience`` seconds."""
        assert reading.task_id
        wait, loop = _POLL_FIRST, asyncio.get_running_loop()
        deadline = loop.time() + patience
        while not reading.settled:
            if loop.time() >= deadline:
                raise TurnTimedOut(
                    f"task {reading.task_id} of {self.url} was still "
                    f"{state_name(reading.state)} after {patience:g} s"
                )
            await asyncio.sleep(wait)
            wait = min(wait * 2, _POLL_MOST)
            await self._read_task(client, reading)

    async def _find_task(self, client: Client, reading: _Reading, message_id: str) -> bool:
        """Whether the task of message ``message_id`` is known, looking it up in the
        conversation's tasks (``ListTasks``) when no event named it."""
        if reading.task_id:
            return True
        listed = await client.list_tasks(ListTasksRequest(context_id=reading.context_id))
        for task in listed.tasks:
            if any(sent.message_id == message_id for sent in task.history):
                reading.task_id = task.id
                return True
        return False

    async def _read_task(self, client: Client, reading: _Reading) -> None:
        assert reading.task_id
        task = await client.get_task(GetTaskRequest(id=reading.task_id))
        reading.take(StreamResponse(task=task))

    async def cancel(self, task_id: str, http: httpx.AsyncClient) -> None:
        """Ask the agent to cancel task ``task_id`` (``CancelTask``) through ``http``."""
        with translated(f"canceling task {task_id} of {self.url}"):
            await self._client(http).cancel_task(CancelTaskRequest(id=task_id))

    async def aclose(self) -> None:
        """Release the SDK's clients (the ``httpx.AsyncClient`` objects are the target's
        to close)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
