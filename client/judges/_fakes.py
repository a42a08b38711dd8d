"""FakeJudge and FakeChat: a scripted judge and chat model for offline tests.

Rule: a fake never passes by accident: past its script, without a default, it raises.
See ARCHITECTURE.md, "Fake judges".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ._base import JudgeError, JudgeRequest, JudgeUsage, JudgeVerdict, level_verdict
from ._chat import ChatCompletion

Scripted = float | Sequence[float] | JudgeVerdict | Callable[[JudgeRequest], "float | JudgeVerdict"]
Answer = Scripted | BaseException


class _Script:
    """What both fakes keep: the script, the default, the model name and its tokens."""

    def __init__(
        self, script: Iterable[Any], default: Any, model: str, tokens: tuple[int, int]
    ) -> None:
        self._script = list(script)
        self._default = default
        self._model = model
        self._usage = JudgeUsage(input_tokens=tokens[0], output_tokens=tokens[1])

    @property
    def model(self) -> str:
        return self._model

    def _next(self, call: int) -> Any:
        """The next scripted answer (else the default); a scripted exception is raised."""
        if self._script:
            answer = self._script.pop(0)
        elif self._default is not None:
            answer = self._default
        else:
            raise JudgeError(
                f"{type(self).__name__} has no scripted answer left for call {call}: every "
                "call takes the next one, each trial's (--repeat) included; script one answer "
                "per call, or pass default= to answer the rest"
            )
        if isinstance(answer, BaseException):
            raise answer
        return answer


class FakeJudge(_Script):
    """A judge that answers from a script."""

    def __init__(
        self,
        script: Iterable[Answer] = (),
        *,
        default: Answer | None = None,
        model: str = "fake-judge",
        tokens: tuple[int, int] = (0, 0),
    ) -> None:
        super().__init__(script, default, model, tokens)
        self.requests: list[JudgeRequest] = []

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def judge(self, request: JudgeRequest) -> JudgeVerdict:
        self.requests.append(request)
        answer: Scripted = self._next(self.calls)
        if callable(answer) and not isinstance(answer, JudgeVerdict):
            answer = answer(request)
        if isinstance(answer, JudgeVerdict):
            return answer
        if isinstance(answer, Sequence):
            verdict = _distributed(request, answer)
            verdict.model, verdict.usage = self._model, self._usage
            return verdict
        return JudgeVerdict(
            score=float(answer),
            reason=f"scripted score {answer:g}",
            model=self._model,
            usage=self._usage,
        )


def _distributed(request: JudgeRequest, probabilities: Sequence[float]) -> JudgeVerdict:
    """The verdict of a scripted answer distribution (see the rules)."""
    levels = request.criterion.levels
    if levels is None:
        raise JudgeError(
            f"a scripted answer distribution answers a classifier; {request.criterion.name!r} "
            "is not one: script a score"
        )
    if len(probabilities) != len(levels):
        raise JudgeError(
            f"the scripted distribution has {len(probabilities)} probabilities for "
            f"{len(levels)} levels ({', '.join(levels)}): one per level, worst first"
        )
    mass = [float(p) for p in probabilities]
    chosen = max(range(len(mass)), key=lambda index: (mass[index], index))
    return level_verdict(levels, chosen, mass)


Said = str | Mapping[str, Any]
Spoken = Said | Callable[[list[dict[str, str]]], Said]
Reply = Spoken | BaseException


class FakeChat(_Script):
    """A chat model that answers from a script (for :class:`AgentLoopJudge` tests)."""

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        default: Reply | None = None,
        model: str = "fake-chat",
        tokens: tuple[int, int] = (0, 0),
        temperature: float = 0.0,
    ) -> None:
        super().__init__(script, default, model, tokens)
        self.temperature = temperature  # read by the loop's cache key, as a real model's
        self.conversations: list[list[dict[str, str]]] = []

    @property
    def calls(self) -> int:
        return len(self.conversations)

    async def complete(
        self, messages: Sequence[Mapping[str, str]], *, max_tokens: int | None = None
    ) -> ChatCompletion:
        seen = [dict(message) for message in messages]
        self.conversations.append(seen)
        answer: Spoken = self._next(self.calls)
        if callable(answer):
            answer = answer(seen)
        content = answer if isinstance(answer, str) else msgspec.json.encode(answer).decode()
        return ChatCompletion(content=content, usage=self._usage, model=self._model)
