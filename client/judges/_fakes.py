"""FakeJudge: a scripted judge for offline tests (yours and ours).

Rules:

- Scripted answers are consumed in order, one per call: a number (the score), a
  :class:`~.base.JudgeVerdict`, an exception instance (raised, e.g. ``JudgeError(...)``), or
  a callable ``request -> number | JudgeVerdict`` (for answers that depend on the request).
- ``default`` answers every call once the script is used up. Without a default, a call
  past the end of the script raises :class:`~.base.JudgeError`: a fake never passes by
  accident.
- Every request is kept in ``requests``; ``calls`` counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ._base import JudgeError, JudgeRequest, JudgeUsage, JudgeVerdict

Answer = float | JudgeVerdict | BaseException | Callable[[JudgeRequest], "float | JudgeVerdict"]


class FakeJudge:
    """A judge that answers from a script."""

    def __init__(
        self,
        script: Iterable[Answer] = (),
        *,
        default: Answer | None = None,
        model: str = "fake-judge",
        tokens: tuple[int, int] = (0, 0),
    ) -> None:
        self._script = list(script)
        self._default = default
        self._model = model
        self._tokens = tokens
        self.requests: list[JudgeRequest] = []

    @property
    def model(self) -> str:
        return self._model

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def judge(self, request: JudgeRequest) -> JudgeVerdict:
        self.requests.append(request)
        if self._script:
            answer = self._script.pop(0)
        elif self._default is not None:
            answer = self._default
        else:
            raise JudgeError(f"FakeJudge has no scripted answer left for call {self.calls}")
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer) and not isinstance(answer, JudgeVerdict):
            answer = answer(request)
        if isinstance(answer, JudgeVerdict):
            return answer
        return JudgeVerdict(
            score=float(answer),
            reason=f"scripted score {answer:g}",
            model=self._model,
            usage=JudgeUsage(input_tokens=self._tokens[0], output_tokens=self._tokens[1]),
        )
