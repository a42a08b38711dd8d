"""The judge protocol: what a judge is asked (:class:`JudgeRequest`), what it answers
(:class:`JudgeVerdict`), how it fails (:class:`JudgeError`).

Rule: no implicit pass: a judge without a verdict raises, and counts only its own tokens.
See ARCHITECTURE.md, "The judge protocol".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec
from evalport.protocol import AgentRun

from .._core import JudgeToolCall


class JudgeError(Exception):
    """A judge could not produce a verdict; the assertion is then not evaluated.

    ``usage``, ``tool_calls`` and ``steps`` say what the attempt spent and read before it
    failed (an agent-loop judge out of steps has spent tokens all the same).
    """

    def __init__(
        self,
        message: str = "",
        *,
        usage: JudgeUsage | None = None,
        tool_calls: list[JudgeToolCall] | None = None,
        steps: int = 0,
    ) -> None:
        super().__init__(message)
        self.usage = usage if usage is not None else JudgeUsage()
        self.tool_calls = list(tool_calls or ())
        self.steps = steps


class MalformedAnswer(JudgeError):
    """The judge's server answered, but not with a usable completion or verdict."""


class Example(msgspec.Struct, frozen=True, kw_only=True):
    """A few-shot example for a custom criterion: an output and the score it deserves."""

    output: str
    score: float
    reason: str = ""
    input: str | None = None


class Criterion(msgspec.Struct, frozen=True, kw_only=True):
    """What to judge and how (build them with :mod:`evalport.client.judges.criteria`).

    ``instructions`` is the rubric, written by the eval author (trusted text).
    ``reference`` is material the output is compared with; ``reference_label`` says what
    it is ("expected answer", "source text", ...). ``scope`` is ``"output"`` to judge one
    text, ``"trajectory"`` to judge the whole conversation. ``levels`` (worst to best)
    makes it a classifier: the judge picks one level and the score is the level's
    position (or the expected position under the answer distribution) over
    ``len(levels) - 1``.
    """

    name: str
    instructions: str
    reference: str | None = None
    reference_label: str = "reference"
    scope: str = "output"
    examples: tuple[Example, ...] = ()
    levels: tuple[str, ...] | None = None

    @property
    def is_classifier(self) -> bool:
        return self.levels is not None


class JudgeRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One question to a judge. Everything but the criterion is untrusted data."""

    criterion: Criterion
    output: str
    input: str | None = None
    transcript: str | None = None
    run: AgentRun | None = None
    sample: int = 0

    @property
    def reference(self) -> str | None:
        return self.criterion.reference


class JudgeUsage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens a judge call spent (its own, apart from the target's)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: JudgeUsage) -> JudgeUsage:
        return JudgeUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class JudgeVerdict(msgspec.Struct, kw_only=True):
    """A judge's answer."""

    score: float
    reason: str = ""
    evidence: list[str] = msgspec.field(default_factory=list)
    usage: JudgeUsage = msgspec.field(default_factory=JudgeUsage)
    model: str | None = None
    cached: bool = False
    details: dict[str, Any] = msgspec.field(default_factory=dict)
    tool_calls: list[JudgeToolCall] = msgspec.field(default_factory=list)
    steps: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.score, bool) or not 0.0 <= self.score <= 1.0:
            raise JudgeError(f"a verdict's score must be a number in [0, 1], got {self.score!r}")


def level_verdict(levels: Sequence[str], chosen: int, mass: Sequence[float]) -> JudgeVerdict:
    """A classifier's verdict: level ``chosen`` of ``levels`` (worst first), scored by the
    expected level under the answer distribution ``mass`` (normalised) when it holds any,
    else by the chosen level's position, over ``len(levels) - 1``."""
    top = len(levels) - 1
    details: dict[str, Any] = {"level": levels[chosen], "levels": list(levels)}
    score = chosen / top
    total = sum(mass)
    if total > 0:
        probabilities = details["probabilities"] = [value / total for value in mass]
        score = sum(index * p for index, p in enumerate(probabilities)) / top
    return JudgeVerdict(
        score=min(max(score, 0.0), 1.0),
        reason=f"level {chosen}: {levels[chosen]}",
        details=details,
    )


@runtime_checkable
class Judge(Protocol):
    """Anything that grades a :class:`JudgeRequest`."""

    @property
    def model(self) -> str | None: ...

    async def judge(self, request: JudgeRequest) -> JudgeVerdict: ...
