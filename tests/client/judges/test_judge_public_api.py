"""The public names of the judges package and the simulated users module are pinned."""

from __future__ import annotations

import evalport.client.judges as judges
import evalport.client.simulated as simulated


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
    assert sorted(simulated.__all__) == [
        "ScriptedUser",
        "SimulatedUser",
        "SimulatedUserError",
    ]
