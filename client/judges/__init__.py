"""Judges: semantic grading of agent output by a model, hardened and measurable.

See :mod:`.base` for the protocol, :mod:`.prompts` for the injection hardening,
:mod:`.expectation` for how judges run inside a case, :mod:`.calibrate` for agreement with
human labels.
"""

from . import criteria
from ._base import (
    Criterion,
    Example,
    Judge,
    JudgeError,
    JudgeRequest,
    JudgeUsage,
    JudgeVerdict,
    MalformedAnswer,
)
from ._cache import JudgeCache
from ._expectation import DEFAULT_THRESHOLD, JudgeAssertions, JudgeExpectation, JudgeHost
from ._fakes import FakeJudge
from ._openai import JudgeConfig, OpenAIJudge
from ._transcript import render_transcript

__all__ = [
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
