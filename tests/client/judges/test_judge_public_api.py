"""The public names of the judges package are pinned; simulated users are on the client face."""

from __future__ import annotations

import evalport.client as client
import evalport.client.judges as judges


def test_judges_public_api() -> None:
    assert sorted(judges.__all__) == sorted(
        [
            "DEFAULT_THRESHOLD",
            "Criterion",
            "Example",
            "FakeJudge",
            "Judge",
            "JudgeAssertions",
            "JudgeCache",
            "JudgeConfig",
            "JudgeError",
            "JudgeExpectation",
            "JudgeHost",
            "JudgeRequest",
            "JudgeUsage",
            "JudgeVerdict",
            "MalformedAnswer",
            "OpenAIJudge",
            "criteria",
            "render_transcript",
        ]
    )
    for name in judges.__all__:
        assert getattr(judges, name) is not None


def test_simulated_public_api() -> None:
    names = {"ScriptedUser", "SimulatedUser", "SimulatedUserError", "UserSimulator"}
    assert names <= set(client.__all__)
    assert client.UserSimulator.__module__ == "evalport.client._conversation"
