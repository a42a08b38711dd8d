"""Judge expectations in a case: ``t.judge().closed_qa("...").at_least(0.75)``.

Rule: nothing passes without a verdict; the judge runs lazily, at most once, on what was
captured when the expectation was made. See ARCHITECTURE.md, "Judge expectations".
"""

from __future__ import annotations

import asyncio
import inspect
import statistics
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, Final, Literal, ParamSpec, Protocol

import msgspec
from evalport.protocol import AgentRun

from .._core import AssertionResult, Expectation, JudgeRecord, Severity, Turn, judge_span
from . import _criteria as criteria
from ._base import Criterion, Judge, JudgeError, JudgeRequest, JudgeVerdict
from ._transcript import render_transcript

DEFAULT_THRESHOLD: Final = 0.7
NO_JUDGE: Final = (
    "no judge configured: set EVALPORT_JUDGE_MODEL (with EVALPORT_JUDGE_BASE_URL and "
    "EVALPORT_JUDGE_API_KEY_ENV as needed) or model under [tool.evalport.judge] in "
    "pyproject.toml (base-url, api-key-env), or give the case or the suite a judge"
)
SampleMode = Literal["mean", "majority"]
P = ParamSpec("P")


class JudgeHost(Protocol):
    """What a judge expectation needs from the eval context."""

    @property
    def run(self) -> AgentRun: ...

    @property
    def turns(self) -> Sequence[Turn]: ...

    @property
    def case_judge(self) -> Judge | None: ...

    @property
    def strict(self) -> bool: ...

    def register(self, expectation: Expectation) -> None: ...

    def record_judge(self, record: JudgeRecord) -> None: ...


def _model(judge: Any) -> str | None:
    model = getattr(judge, "model", None)
    return model if isinstance(model, str) else None


def _copy(run: AgentRun) -> AgentRun:
    return msgspec.json.decode(msgspec.json.encode(run), type=AgentRun)


def _last_exchange(run: AgentRun) -> tuple[str, str | None]:
    """The run's reply and the user's message it answers."""
    return run.reply, run.user_messages[-1] if run.user_messages else None


class JudgeExpectation:
    """One judged criterion; chain ``on``/``at_least``/``soft``/``gate``/``label``/``samples``."""

    def __init__(self, host: JudgeHost, judge: Judge | None, criterion: Criterion) -> None:
        self._host = host
        self._judge = judge
        self._criterion = criterion
        self._run = _copy(host.run)
        turns = host.turns
        self._transcript: str | None = None  # rendered now: later turns do not change it
        if criterion.scope == "trajectory":
            self._transcript = render_transcript(self._run, turns)
        if turns:
            self._output, self._input = turns[-1].reply, turns[-1].message or None
        else:
            self._output, self._input = _last_exchange(self._run)
        self._threshold = DEFAULT_THRESHOLD
        self._severity: Severity = "soft"
        self._label: str | None = None
        self._samples = 1
        self._mode: SampleMode = "mean"
        self._result: AssertionResult | None = None
        self._lock = asyncio.Lock()

    # -- chaining -------------------------------------------------------------------------
    def _unresolved(self, what: str) -> None:
        if self._result is not None:
            raise RuntimeError(f"{what}() must come before the judge ran (it already did)")

    def on(self, subject: str | Turn | AgentRun) -> JudgeExpectation:
        """Judge ``subject`` instead of the latest reply: a text or a turn's reply (as one
        output), or a run (its whole conversation, as with ``trajectory=True``)."""
        self._unresolved("on")
        if isinstance(subject, AgentRun):
            self._run = _copy(subject)
            self._transcript = render_transcript(self._run)
            self._output, self._input = _last_exchange(self._run)
            self._criterion = msgspec.structs.replace(self._criterion, scope="trajectory")
            return self
        if isinstance(subject, Turn):
            self._output, self._input = subject.reply, subject.message or None
        elif isinstance(subject, str):
            self._output = subject
        else:
            raise TypeError(f"on() takes a str or a Turn, not {type(subject).__name__}")
        self._criterion = msgspec.structs.replace(self._criterion, scope="output")
        return self

    def at_least(self, threshold: float) -> JudgeExpectation:
        """Pass when the score reaches ``threshold`` (in [0, 1])."""
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        self._threshold = threshold
        self._regrade()
        return self

    def soft(self) -> JudgeExpectation:
        """A failure lowers the trial's score (the default for judges)."""
        self._severity = "soft"
        self._regrade()
        return self

    def gate(self) -> JudgeExpectation:
        """A failure fails the trial."""
        self._severity = "gate"
        self._regrade()
        return self

    def label(self, text: str) -> JudgeExpectation:
        """A name for the expectation in reports."""
        self._label = text
        self._regrade()
        return self

    def samples(self, n: int, mode: SampleMode = "mean") -> JudgeExpectation:
        """Ask the judge ``n`` times and combine by ``mode`` (``"mean"``/``"majority"``)."""
        self._unresolved("samples")
        if n < 1:
            raise ValueError(f"samples needs n >= 1, got {n}")
        if mode not in ("mean", "majority"):
            raise ValueError(f"samples mode must be 'mean' or 'majority', got {mode!r}")
        self._samples, self._mode = n, mode
        return self

    def __repr__(self) -> str:
        state = "pending" if self._result is None else f"score={self._result.score:.2f}"
        return (
            f"<JudgeExpectation {self._criterion.name} {self._severity} "
            f">= {self._threshold:g} {state}>"
        )

    # -- reading --------------------------------------------------------------------------
    @property
    def criterion(self) -> Criterion:
        return self._criterion

    @property
    def resolved(self) -> bool:
        return self._result is not None

    @property
    def result(self) -> AssertionResult | None:
        """The result once resolved, else ``None`` (reading it never runs the judge)."""
        return self._result

    def request(self, sample: int = 0) -> JudgeRequest:
        """The request the judge gets (the captured output, input, run and transcript)."""
        trajectory = self._criterion.scope == "trajectory"
        return JudgeRequest(
            criterion=self._criterion,
            output=self._output,
            input=self._input,
            transcript=self._transcript if trajectory else None,
            run=self._run,
            sample=sample,
        )

    async def resolve(self) -> AssertionResult:
        """Run the judge (once) and return the result."""
        async with self._lock:
            if self._result is None:
                self._result = await self._evaluate()
                self._regrade()
            return self._result

    async def _evaluate(self) -> AssertionResult:
        judge = self._judge if self._judge is not None else self._host.case_judge
        if judge is None:
            return self._could_not_run(NO_JUDGE)
        verdicts = await asyncio.gather(
            *(self._ask(judge, self.request(sample)) for sample in range(self._samples))
        )
        errors = [item for item in verdicts if isinstance(item, str)]
        if errors:
            return self._could_not_run(errors[0])
        good = [item for item in verdicts if isinstance(item, JudgeVerdict)]
        scores = [verdict.score for verdict in good]
        if self._mode == "majority":
            score = statistics.median_low(scores)
        else:
            score = statistics.fmean(scores)
        first = good[0]
        context: dict[str, Any] = {
            "criterion": self._criterion.name,
            "reason": first.reason,
            "evidence": first.evidence,
            "model": first.model or _model(judge),
            "cached": all(verdict.cached for verdict in good),
        }
        if len(good) > 1:
            context["samples"] = scores
            context["mode"] = self._mode
        if first.details:
            context["details"] = first.details
        return self._make(score, True, first.reason, context)

    async def _ask(self, judge: Judge, request: JudgeRequest) -> JudgeVerdict | str:
        name = self._criterion.name
        spent: JudgeVerdict | JudgeError
        try:
            with judge_span(name, judge) as traced:
                verdict = await judge.judge(request)
                traced(verdict)
        except Exception as error:  # any failure of the judge is reported, never a pass
            spent = error if isinstance(error, JudgeError) else JudgeError()
            message = f"{type(error).__name__}: {error}"
            answer: JudgeVerdict | str = message
            record = JudgeRecord(criterion=name, score=None, error=message)
        else:
            spent = answer = verdict
            record = JudgeRecord(
                criterion=name,
                score=verdict.score,
                reason=verdict.reason,
                evidence=list(verdict.evidence),
                model=verdict.model,
                cached=verdict.cached,
            )
        record.model = record.model or _model(judge)
        criterion = self._criterion
        if criterion.levels is not None:  # a classifier: what it was asked, as Neuron keeps
            record.question, record.reference = criterion.instructions, criterion.reference
            record.levels = list(criterion.levels)
            if isinstance(answer, JudgeVerdict):
                record.probabilities = answer.details.get("probabilities")
        # what the call spent and read, a failed one included (its JudgeError says)
        record.input_tokens = spent.usage.input_tokens
        record.output_tokens = spent.usage.output_tokens
        record.tool_calls, record.steps = list(spent.tool_calls), spent.steps
        self._host.record_judge(record)
        return answer

    def _could_not_run(self, cause: str) -> AssertionResult:
        context = {"criterion": self._criterion.name, "judge_error": cause}
        return self._make(0.0, False, f"judge could not run: {cause}", context)

    def _make(
        self, score: float, evaluated: bool, message: str, context: dict[str, Any]
    ) -> AssertionResult:
        return AssertionResult(
            name=f"judge.{self._criterion.name}",
            score=score,
            passed=False,
            message=message,
            evaluated=evaluated,
            context=context,
        )

    def _regrade(self) -> None:
        result = self._result
        if result is None:
            return
        result.threshold = self._threshold
        result.label = self._label
        result.passed = result.evaluated and result.score >= self._threshold
        strict = not result.evaluated and self._host.strict
        result.severity = "gate" if strict else self._severity
        if result.evaluated:
            reason = result.context.get("reason") or ""
            sign = ">=" if result.passed else "<"
            result.message = f"score {result.score:.2f} {sign} {self._threshold:g}" + (
                f": {reason}" if reason else ""
            )


def _judged(
    build: Callable[P, Criterion], *, renamed: Mapping[str, str] | None = None
) -> Callable[Concatenate[JudgeAssertions, P], JudgeExpectation]:
    """The ``t.judge()`` method of criterion function ``build``: its signature, its
    criterion, registered as an expectation. ``renamed`` maps a keyword the method once
    had to the function's name for it (kept for one release, listed in CHANGELOG.md)."""

    def method(self: JudgeAssertions, /, *args: P.args, **kwargs: P.kwargs) -> JudgeExpectation:
        for old, new in (renamed or {}).items():
            if old in kwargs:
                warnings.warn(
                    f"t.judge().{build.__name__}({old}=...) is deprecated: name it {new}=",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
        return self.criterion(build(*args, **kwargs))

    method.__name__ = method.__qualname__ = build.__name__
    method.__doc__ = build.__doc__
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    signature = inspect.signature(build)
    params += signature.parameters.values()
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=params, return_annotation="JudgeExpectation"
    )
    return method


class JudgeAssertions:
    """The criterion methods of ``t.judge()``, each made from its function in
    :mod:`evalport.client.judges.criteria`; each returns a registered expectation."""

    def __init__(self, host: JudgeHost, judge: Judge | None = None) -> None:
        self._host = host
        self._judge = judge

    def criterion(self, criterion: Criterion) -> JudgeExpectation:
        """Judge any :class:`~.base.Criterion`."""
        expectation = JudgeExpectation(self._host, self._judge, criterion)
        self._host.register(expectation)
        return expectation

    closed_qa = _judged(criteria.closed_qa)
    factuality = _judged(criteria.factuality)
    summarizes = _judged(criteria.summarizes)
    sql = _judged(criteria.sql)
    faithfulness = _judged(criteria.faithfulness)
    correctness = _judged(criteria.correctness)
    relevance = _judged(criteria.relevance)
    helpfulness = _judged(criteria.helpfulness)
    task_completion = _judged(criteria.task_completion)
    custom = _judged(criteria.custom, renamed={"criteria_text": "criteria"})
    classify = _judged(criteria.classify)
