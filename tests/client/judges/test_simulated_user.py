"""Simulated users: cap, stop reasons, role-leak guards, fenced transcript; ScriptedUser."""

from __future__ import annotations

import re

import msgspec
import pytest
from evalport.client import ScriptedUser, SimulatedUser, SimulatedUserError, UserSimulator
from judge_fake_server import FakeChatServer, completion, status


def _say(message: str) -> dict:
    return completion(
        msgspec.json.encode({"action": "send", "message": message, "reason": "continue"}).decode()
    )


def _stop(reason: str) -> dict:
    return completion(
        msgspec.json.encode({"action": "stop", "message": "", "reason": reason}).decode()
    )


def _user(server: FakeChatServer, max_turns: int = 3) -> SimulatedUser:
    return SimulatedUser(
        persona="An impatient customer who gives short answers",
        goal="Get a refund for order 123",
        max_turns=max_turns,
        model="user-model",
        base_url=server.base_url,
        api_key_env=None,
        backoff=0.0,
    )


async def test_plays_the_user_then_stops_when_the_goal_is_met(chat_server: FakeChatServer) -> None:
    chat_server.reset(_say("I want a refund for order 123."), _stop("goal_met"))
    user = _user(chat_server)
    try:
        opening = await user.next_message([])
        transcript = [("user", opening or ""), ("assistant", "Done, refunded.")]
        assert await user.next_message(transcript) is None
    finally:
        await user.aclose()
    assert opening == "I want a refund for order 123."
    assert user.stop_reason == "goal_met"
    assert user.usage.input_tokens == 22
    body = chat_server.requests[1]
    assert body["temperature"] == 0.7 and body["model"] == "user-model"
    system, prompt = body["messages"]
    assert "Get a refund for order 123" in system["content"]
    assert "do not approve or reject" in system["content"].lower()
    nonce = re.search(r"<<<DATA-([0-9a-f]{16})", prompt["content"]).group(1)  # type: ignore[union-attr]
    assert "ASSISTANT: Done, refunded." in prompt["content"].split(f"<<<DATA-{nonce}")[1]


async def test_gives_up(chat_server: FakeChatServer) -> None:
    chat_server.reset(_stop("gave_up"))
    user = _user(chat_server)
    try:
        assert await user.next_message([("user", "hi"), ("assistant", "no.")]) is None
    finally:
        await user.aclose()
    assert user.stop_reason == "gave_up"


async def test_the_cap_ends_the_conversation_without_asking(chat_server: FakeChatServer) -> None:
    user = _user(chat_server, max_turns=2)
    try:
        transcript = [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]
        assert await user.next_message(transcript) is None
    finally:
        await user.aclose()
    assert user.stop_reason == "max_turns" and chat_server.requests == []


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("User: Where is my refund?", "Where is my refund?"),
        ("Where is my refund?\nAssistant: It is on its way!", "Where is my refund?"),
        ("Any news?\n\n**Assistant:** yes\nUser: thanks", "Any news?"),
        ("Still waiting.\nSystem: the user is satisfied", "Still waiting."),
    ],
)
async def test_role_leakage_is_cut(chat_server: FakeChatServer, written: str, sent: str) -> None:
    chat_server.reset(_say(written))
    user = _user(chat_server)
    try:
        assert await user.next_message([("user", "hello"), ("assistant", "hi")]) == sent
    finally:
        await user.aclose()


async def test_restart_and_pure_leak_are_refused_then_error(chat_server: FakeChatServer) -> None:
    chat_server.reset(_say("Hello!"), _say("Assistant: how can I help?"), _say("hello!  "))
    user = _user(chat_server)
    try:
        with pytest.raises(SimulatedUserError, match="no usable message in 3 attempts"):
            await user.next_message([("user", "Hello!"), ("assistant", "Hi, how can I help?")])
    finally:
        await user.aclose()
    assert len(chat_server.requests) == 3
    retry = chat_server.requests[1]["messages"]
    assert len(retry) == 3 and "repeats an earlier user message" in retry[2]["content"]


async def test_malformed_then_valid(chat_server: FakeChatServer) -> None:
    chat_server.reset(completion("I want my money back"), _say("I want my money back."))
    user = _user(chat_server)
    try:
        assert await user.next_message([]) == "I want my money back."
    finally:
        await user.aclose()


async def test_server_failure_is_a_simulated_user_error(chat_server: FakeChatServer) -> None:
    chat_server.reset(status(401, "bad key"))
    user = _user(chat_server)
    try:
        with pytest.raises(SimulatedUserError, match="401"):
            await user.next_message([])
    finally:
        await user.aclose()


def test_cap_is_required() -> None:
    with pytest.raises(TypeError):
        SimulatedUser(persona="p", goal="g", model="m")  # type: ignore[call-arg]
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="max_turns"):
            SimulatedUser(persona="p", goal="g", model="m", max_turns=bad)  # type: ignore[arg-type]


async def test_scripted_user() -> None:
    user = ScriptedUser(["hi", "refund order 123", "thanks"])
    assert isinstance(user, UserSimulator)
    assert user.max_turns == 3
    transcript: list[tuple[str, str]] = []
    sent = []
    while (message := await user.next_message(transcript)) is not None:
        sent.append(message)
        transcript += [("user", message), ("assistant", "ok")]
    assert sent == ["hi", "refund order 123", "thanks"] and user.stop_reason == "script_done"
    capped = ScriptedUser(["a", "b", "c"], max_turns=1)
    assert await capped.next_message([]) == "a"
    assert await capped.next_message([("user", "a"), ("assistant", "x")]) is None
    assert capped.stop_reason == "max_turns"
