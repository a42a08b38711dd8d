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
- One definition: each object is a dataclass over :class:`JudgeCheck` (``threshold=`` and
  ``judge=``, checked once) whose fields are its criterion's arguments, by name, and whose
  class argument ``build=`` is that criterion's function in :mod:`.criteria`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from evalport.protocol import AgentRun

from .._core import Trajectory, Turn
from . import _criteria as criteria
from ._base import Criterion, Example, Judge
from ._expectation import DEFAULT_THRESHOLD, JudgeAssertions, JudgeExpectation, JudgeHost


def _subject(subject: Any) -> str | Turn | AgentRun | None:
    if isinstance(subject, Trajectory):
        return subject.run
    if subject is None or isinstance(subject, str | Turn | AgentRun):
        return subject
    raise TypeError(
        f"a judge checks a str, a Turn, an AgentRun or a Trajectory, not {type(subject).__name__}"
    )


@dataclass(eq=False, repr=False)
class JudgeCheck:
    """A judged criterion as an object: ``ctx.check(JudgeCheck(criterion), subject)``."""

    criterion: Criterion
    threshold: float = field(default=DEFAULT_THRESHOLD, kw_only=True)
    judge: Judge | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {self.threshold}")

    def expect(self, host: JudgeHost, subject: Any = None) -> JudgeExpectation:
        """Register this criterion's expectation with ``host`` (what ``check`` calls)."""
        chosen = _subject(subject)
        expectation = JudgeAssertions(host, self.judge).criterion(self.criterion)
        if chosen is not None:
            expectation.on(chosen)
        return expectation.at_least(self.threshold)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.criterion.name}, threshold={self.threshold:g})"


@dataclass(eq=False, repr=False)
class _Made(JudgeCheck):
    """A judge object whose criterion ``build`` (the class argument) makes from the fields
    given to the constructor, by name."""

    build: ClassVar[Callable[..., Criterion]]
    criterion: Criterion = field(init=False)
    trajectory: bool = field(default=False, kw_only=True)

    def __init_subclass__(cls, *, build: Callable[..., Criterion], **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.build = staticmethod(build)

    def __post_init__(self) -> None:
        given = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        del given["threshold"], given["judge"]
        self.criterion = self.build(**given)
        super().__post_init__()


@dataclass(eq=False, repr=False)
class ClosedQA(_Made, build=criteria.closed_qa):
    """Does the output satisfy a yes/no requirement (``criteria.closed_qa``)?"""

    question: str


@dataclass(eq=False, repr=False)
class Factuality(_Made, build=criteria.factuality):
    """Is the output consistent with an expert answer (``criteria.factuality``)?"""

    reference: str


@dataclass(eq=False, repr=False)
class Summarizes(_Made, build=criteria.summarizes):
    """Is the output a faithful summary of the source (``criteria.summarizes``)?"""

    source: str


@dataclass(eq=False, repr=False)
class SqlEquivalent(_Made, build=criteria.sql):
    """Is the output SQL equivalent to the reference query (``criteria.sql``)?"""

    reference: str


@dataclass(eq=False, repr=False)
class Faithfulness(_Made, build=criteria.faithfulness):
    """Neuron's ``FaithfulnessJudge``: is every claim supported by ``context``?"""

    context: str


@dataclass(eq=False, repr=False)
class Correctness(_Made, build=criteria.correctness):
    """Neuron's ``CorrectnessJudge``: does the output give the ``expected`` answer?"""

    expected: str


@dataclass(eq=False, repr=False)
class Relevance(_Made, build=criteria.relevance):
    """Neuron's ``RelevanceJudge``: does the output address ``question`` (default: the
    user's message)?"""

    question: str | None = None


@dataclass(eq=False, repr=False)
class Helpfulness(_Made, build=criteria.helpfulness):
    """Neuron's ``HelpfulnessJudge``: is the output useful and actionable?"""


@dataclass(eq=False, repr=False)
class TaskCompletion(_Made, build=criteria.task_completion):
    """Neuron's ``TaskCompletionJudge``: was the user's ``goal`` achieved over the whole
    conversation (always reads the trajectory)?"""

    goal: str
    trajectory: bool = field(default=True, init=False)


@dataclass(eq=False, repr=False)
class Custom(_Made, build=criteria.custom):
    """``criteria`` in your words, an optional ``reference`` and few-shot ``examples``
    (``criteria.custom``; Neuron's ``AgentJudge``)."""

    criteria: str
    reference: str | None = field(default=None, kw_only=True)
    examples: Iterable[Example | Mapping[str, Any]] = field(default=(), kw_only=True)
    name: str = field(default="custom", kw_only=True)


@dataclass(eq=False, repr=False)
class ClassifierJudge(_Made, build=criteria.classify):
    """Neuron's ``ClassifierJudge``: a yes/no ``question``, or ordered ``levels`` (worst
    first), scored from the answer distribution where the judge gives one
    (``criteria.classify``)."""

    question: str
    levels: Sequence[str] | None = None
    reference: str | None = field(default=None, kw_only=True)
    name: str = field(default="classify", kw_only=True)
