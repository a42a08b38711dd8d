"""Judge expectations in a case: ``t.judge().closed_qa("...").at_least(0.75)``.

Rules:

- What is judged is captured when the expectation is **made**: the latest reply and the
  user's message of that turn, a copy of the run, and the conversation rendered as a
  transcript (for criteria that read the whole trajectory). Later turns do not change it. ``.on(text)`` (or ``.on(turn)``)
  judges that text instead, as a single output; ``.on(run)`` judges that run's whole
  conversation.
- The judge runs **lazily**, at most once, the first time :meth:`JudgeExpectation.resolve`
  is called (the runner calls it when the case ends). ``samples(n, mode)`` asks ``n``
  times: ``"mean"`` scores the mean; ``"majority"`` scores the lower median, so the
  expectation passes only when a strict majority of samples reach the threshold.
- Judge expectations are **soft** by default (a failure makes the trial ``scored``);
  ``.gate()`` lets one fail the trial. The default threshold is :data:`DEFAULT_THRESHOLD`.
- Which judge: the one passed to ``t.judge(judge)``, else the context's ``case_judge``
  (the case's, else the suite's, else the configured one; the context resolves that).
- Nothing passes without a verdict. A judge that **could not run** (none configured, its
  key variable unset, its server down, no valid answer) gives one result whatever the
  cause: ``evaluated=False``, the message ``judge could not run: <cause>`` and
  ``context["judge_error"]`` the cause, which names the ``EVALPORT_JUDGE_*`` variables
  and ``[tool.evalport.judge]`` keys to set. The trial's verdict is then ``error``
  (unless a gate failed: ``failed``), counted under errors like any error
  (:func:`~evalport.client._results.trial_verdict`), soft or gate, strict or not.
- Every judge call, cached or not, failed or not, is reported through
  ``host.record_judge`` with the judge's own tokens, apart from the target's usage (a
  failed call with what its :class:`~.base.JudgeError` says it spent and read).
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol

import msgspec
from evalport.protocol import AgentRun

from .._core import AssertionResult, Expectation, JudgeRecord, Severity, Turn, judge_span
from . import _criteria as criteria
from ._base import Criterion, Example, Judge, JudgeError, JudgeRequest, JudgeVerdict
from ._transcript import render_transcript

DEFAULT_THRESHOLD: Final = 0.7
NO_JUDGE: Final = (
    "no judge configured: set EVALPORT_JUDGE_MODEL (with EVALPORT_JUDGE_BASE_URL and "
    "EVALPORT_JUDGE_API_KEY_ENV as needed) or model under [tool.evalport.judge] in "
    "pyproject.toml (base-url, api-key-env), or give the case or the suite a judge"
)
SampleMode = Literal["mean", "majority"]


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


class JudgeAssertions:
    """The criterion methods of ``t.judge()``; each returns a registered expectation."""

    def __init__(self, host: JudgeHost, judge: Judge | None = None) -> None:
        self._host = host
        self._judge = judge

    def criterion(self, criterion: Criterion) -> JudgeExpectation:
        """Judge any :class:`~.base.Criterion`."""
        expectation = JudgeExpectation(self._host, self._judge, criterion)
        self._host.register(expectation)
        return expectation

    def closed_qa(self, question: str, *, trajectory: bool = False) -> JudgeExpectation:
        return self.criterion(criteria.closed_qa(question, trajectory=trajectory))

    def factuality(self, reference: str, *, trajectory: bool = False) -> JudgeExpectation:
        return self.criterion(criteria.factuality(reference, trajectory=trajectory))

    def summarizes(self, source: str, *, trajectory: bool = False) -> JudgeExpectation:
        return self.criterion(criteria.summarizes(source, trajectory=trajectory))

    def sql(self, reference: str, *, trajectory: bool = False) -> JudgeExpectation:
        return self.criterion(criteria.sql(reference, trajectory=trajectory))

    def faithfulness(self, context: str, *, trajectory: bool = False) -> JudgeExpectation:
        return self.criterion(criteria.faithfulness(context, trajectory=trajectory))

    def correctness(self, expected: str, *, trajectory: bool = False) -> JudgeExpectation:
        return self.criterion(criteria.correctness(expected, trajectory=trajectory))

    def relevance(
        self, question: str | None = None, *, trajectory: bool = False
    ) -> JudgeExpectation:
        return self.criterion(criteria.relevance(question, trajectory=trajectory))

    def helpfulness(self, *, trajectory: bool = False) -> JudgeExpectation:
        return self.criterion(criteria.helpfulness(trajectory=trajectory))

    def task_completion(self, goal: str) -> JudgeExpectation:
        return self.criterion(criteria.task_completion(goal))

    def custom(
        self,
        criteria_text: str,
        *,
        examples: Iterable[Example | Mapping[str, Any]] = (),
        reference: str | None = None,
        trajectory: bool = False,
        name: str = "custom",
    ) -> JudgeExpectation:
        return self.criterion(
            criteria.custom(
                criteria_text,
                examples=examples,
                reference=reference,
                trajectory=trajectory,
                name=name,
            )
        )

    def classify(
        self,
        question: str,
        levels: Sequence[str] | None = None,
        *,
        reference: str | None = None,
        trajectory: bool = False,
        name: str = "classify",
    ) -> JudgeExpectation:
        return self.criterion(
            criteria.classify(
                question, levels, reference=reference, trajectory=trajectory, name=name
            )
        )
