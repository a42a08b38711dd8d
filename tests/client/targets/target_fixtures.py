"""Shared pieces of the target tests: a base URL, a token, runs as servers send them."""

from __future__ import annotations

from typing import Any

BASE = "http://agent.test/eval/"
TOKEN = "tok-very-secret-0123456789"
SECRET = "SECRET-4111111111111111"


class Sleeps:
    """A RetryPolicy sleep that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.waits.append(delay)


def health(*capabilities: str, protocol: str = "1") -> dict[str, Any]:
    return {
        "status": "ok",
        "protocol": protocol,
        "agent": {"name": "support-bot", "version": "2.3.1"},
        "capabilities": list(capabilities),
    }


def wire_run(turns: int = 1, *, secret: str = SECRET) -> dict[str, Any]:
    """An accumulated run as a server sends it: one tool step and one final step per turn."""
    steps: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        call = {"id": f"c{turn}", "name": "lookup", "arguments": {"card": secret, "n": turn}}
        steps.append(
            {
                "id": f"00000000-0000-0000-0000-0000000000{turn:02d}",
                "turn": turn,
                "index": 0,
                "type": "tool_execution",
                "requestedToolCalls": [call],
                "toolExecutions": [
                    {
                        "id": f"00000000-0000-0000-0000-0000000001{turn:02d}",
                        "name": "lookup",
                        "toolCallId": f"c{turn}",
                        "arguments": {"card": secret, "n": turn},
                        "result": {"holder": secret},
                    }
                ],
                "usage": {"input": 10, "output": 5},
            }
        )
        steps.append(
            {
                "id": f"00000000-0000-0000-0000-0000000002{turn:02d}",
                "turn": turn,
                "index": 1,
                "type": "final_response",
                "outputMessages": [{"role": "assistant", "content": f"reply {turn}"}],
                "usage": {"input": 3, "output": 2},
            }
        )
    return {
        "reply": f"reply {turns}",
        "status": "completed",
        "turns": turns,
        "errors": "",
        "steps": steps,
        "userMessages": [f"message {n}" for n in range(1, turns + 1)],
    }
