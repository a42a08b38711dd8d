"""Judges as objects: a criterion with its threshold, passed to ``ctx.check(...)``.

Neuron's users write ``self.assert(new CorrectnessJudge(...), $output)``; here that is
``ctx.check(Correctness(expected="4"), subject)`` (or ``self.check(...)`` in an
:class:`~evalport.client.Evaluator`).

Rules:

- An object is a value: a :class:`~.base.Criterion`, a threshold (default
  :data:`~.expectation.DEFAULT_THRESHOLD`, 0.7), optionally a judge. It grades nothing by
  itself. ``ctx.check(obj, subject)`` makes the expectation the ``ctx.judge()`` chain
  makes (:meth:`JudgeAssertions.criterion`, one code path), sets the threshold and returns
  it, so the verdict rules are those of the chain: lazy, soft by default (``.gate()``
  chains), no pass without a verdict.
- The subject: ``None`` is the latest reply (with the conversation when built with
  ``trajectory=True``); a text or a :class:`~evalport.client.Turn` is judged as one
  output; an :class:`~evalport.protocol.AgentRun` or a
  :class:`~evalport.client.Trajectory` is judged as a whole conversation, as Neuron's
  judges read a ``Trajectory``.
- Which judge: the object's ``judge=``, else the case's, else the suite's, else the
  configured one (as for ``ctx.judge()``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalport.protocol import AgentRun

from .._core import Trajectory, Turn
from . import _criteria as criteria
from ._base import Criterion, Example, Judge
from ._criteria import custom as _custom
from ._expectation import DEFAULT_THRESHOLD, JudgeAssertions, JudgeExpectation, JudgeHost


def _subject(subject: Any) -> str | Turn | AgentRun | None:
    if isinstance(subject, Trajectory):
        return subject.run
    if subject is None or isinstance(subject, str | Turn | AgentRun):
        return subject
    raise TypeError(
        f"a judge checks a str, a Turn, an AgentRun or a Trajectory, not {type(subject).__name__}"
    )


class JudgeCheck:
    """A judged criterion as an object: ``ctx.check(JudgeCheck(criterion), subject)``."""

    def __init__(
        self,
        criterion: Criterion,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        self.criterion = criterion
        self.threshold = threshold
        self.judge = judge

    def expect(self, host: JudgeHost, subject: Any = None) -> JudgeExpectation:
        """Register this criterion's expectation with ``host`` (what ``check`` calls)."""
        chosen = _subject(subject)
        expectation = JudgeAssertions(host, self.judge).criterion(self.criterion)
        if chosen is not None:
            expectation.on(chosen)
        return expectation.at_least(self.threshold)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.criterion.name}, threshold={self.threshold:g})"


class ClosedQA(JudgeCheck):
    """Does the output satisfy a yes/no requirement (``criteria.closed_qa``)?"""

    def __init__(
        self,
        question: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
    ) -> None:
        made = criteria.closed_qa(question, trajectory=trajectory)
        super().__init__(made, threshold=threshold, judge=judge)


class Factuality(JudgeCheck):
    """Is the output consistent with an expert answer (``criteria.factuality``)?"""

    def __init__(
        self,
        reference: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
    ) -> None:
        made = criteria.factuality(reference, trajectory=trajectory)
        super().__init__(made, threshold=threshold, judge=judge)


class Summarizes(JudgeCheck):
    """Is the output a faithful summary of the source (``criteria.summarizes``)?"""

    def __init__(
        self,
        source: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
    ) -> None:
        made = criteria.summarizes(source, trajectory=trajectory)
        super().__init__(made, threshold=threshold, judge=judge)


class SqlEquivalent(JudgeCheck):
    """Is the output SQL equivalent to the reference query (``criteria.sql``)?"""

    def __init__(
        self,
        reference: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
    ) -> None:
        made = criteria.sql(reference, trajectory=trajectory)
        super().__init__(made, threshold=threshold, judge=judge)


class Faithfulness(JudgeCheck):
    """Neuron's ``FaithfulnessJudge``: is every claim supported by ``context``?"""

    def __init__(
        self,
        context: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
    ) -> None:
        made = criteria.faithfulness(context, trajectory=trajectory)
        super().__init__(made, threshold=threshold, judge=judge)


class Correctness(JudgeCheck):
    """Neuron's ``CorrectnessJudge``: does the output give the ``expected`` answer?"""

    def __init__(
        self,
        expected: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
    ) -> None:
        made = criteria.correctness(expected, trajectory=trajectory)
        super().__init__(made, threshold=threshold, judge=judge)


class Relevance(JudgeCheck):
    """Neuron's ``RelevanceJudge``: does the output address ``question`` (default: the
    user's message)?"""

    def __init__(
        self,
        question: str | None = None,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
    ) -> None:
        made = criteria.relevance(question, trajectory=trajectory)
        super().__init__(made, threshold=threshold, judge=judge)


class Helpfulness(JudgeCheck):
    """Neuron's ``HelpfulnessJudge``: is the output useful and actionable?"""

    def __init__(
        self,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
    ) -> None:
        made = criteria.helpfulness(trajectory=trajectory)
        super().__init__(made, threshold=threshold, judge=judge)


class TaskCompletion(JudgeCheck):
    """Neuron's ``TaskCompletionJudge``: was the user's ``goal`` achieved over the whole
    conversation (always reads the trajectory)?"""

    def __init__(
        self,
        goal: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
    ) -> None:
        super().__init__(criteria.task_completion(goal), threshold=threshold, judge=judge)


class AgentJudge(JudgeCheck):
    """Neuron's ``AgentJudge``: ``criteria`` in your words, an optional ``reference`` and
    few-shot ``examples`` (``criteria.custom``)."""

    def __init__(
        self,
        criteria: str,
        *,
        reference: str | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        examples: Iterable[Example | Mapping[str, Any]] = (),
        judge: Judge | None = None,
        trajectory: bool = False,
        name: str = "custom",
    ) -> None:
        made = _custom(  # the parameter ``criteria`` hides the module here
            criteria, examples=examples, reference=reference, trajectory=trajectory, name=name
        )
        super().__init__(made, threshold=threshold, judge=judge)


class ClassifierJudge(JudgeCheck):
    """Neuron's ``ClassifierJudge``: a yes/no ``question``, or ordered ``levels`` (worst
    first), scored from the answer distribution where the judge gives one
    (``criteria.classify``)."""

    def __init__(
        self,
        question: str,
        levels: Sequence[str] | None = None,
        *,
        reference: str | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        trajectory: bool = False,
        name: str = "classify",
    ) -> None:
        made = criteria.classify(
            question, levels, reference=reference, trajectory=trajectory, name=name
        )
        super().__init__(made, threshold=threshold, judge=judge)
