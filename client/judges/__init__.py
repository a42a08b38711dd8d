"""Judges: grade agent output with a model, hardened against injection and measurable.

In a case, ``ctx.judge().correctness("4")`` or ``ctx.check(Correctness("4"), subject)``;
any criterion from ``evalport.client.judges.criteria``. ``OpenAIJudge`` asks any
OpenAI-compatible server, ``AgentLoopJudge`` reads the run with tools, ``FakeJudge``
answers offline. A judge that could not run never passes.
"""

import warnings as _warnings

from .._core import JudgeToolCall
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
from ._chat import ChatCompletion
from ._expectation import DEFAULT_THRESHOLD, JudgeAssertions, JudgeExpectation, JudgeHost
from ._fakes import FakeChat, FakeJudge
from ._loop import AgentLoopJudge, ChatModel
from ._objects import (
    ClassifierJudge,
    ClosedQA,
    Correctness,
    Custom,
    Factuality,
    Faithfulness,
    Helpfulness,
    JudgeCheck,
    Relevance,
    SqlEquivalent,
    Summarizes,
    TaskCompletion,
)
from ._openai import JudgeConfig, OpenAIJudge
from ._simulated import ScriptedUser, SimulatedUser, SimulatedUserError
from ._transcript import render_transcript

__all__ = [
    "DEFAULT_THRESHOLD",
    "AgentLoopJudge",
    "ChatCompletion",
    "ChatModel",
    "ClassifierJudge",
    "ClosedQA",
    "Correctness",
    "Criterion",
    "Custom",
    "Example",
    "Factuality",
    "Faithfulness",
    "FakeChat",
    "FakeJudge",
    "Helpfulness",
    "Judge",
    "JudgeAssertions",
    "JudgeCache",
    "JudgeCheck",
    "JudgeConfig",
    "JudgeError",
    "JudgeExpectation",
    "JudgeHost",
    "JudgeRequest",
    "JudgeToolCall",
    "JudgeUsage",
    "JudgeVerdict",
    "MalformedAnswer",
    "OpenAIJudge",
    "Relevance",
    "ScriptedUser",
    "SimulatedUser",
    "SimulatedUserError",
    "SqlEquivalent",
    "Summarizes",
    "TaskCompletion",
    "criteria",
    "render_transcript",
]


def __getattr__(name: str) -> object:
    # Deprecated names, kept for one release (listed in CHANGELOG.md).
    if name == "AgentJudge":
        _warnings.warn(
            "evalport.client.judges.AgentJudge is deprecated; use Custom (AgentJudge stays "
            "Neuron's name in evalport.client.assertions.neuron)",
            DeprecationWarning,
            stacklevel=2,
        )
        return Custom
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
