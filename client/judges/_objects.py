"""Judges as objects (Neuron's ``CorrectnessJudge``...): a criterion and its threshold,
for ``ctx.check(obj, subject)``.

Rule: each object is made from its criterion's function (``build=``) and makes the
expectation ``ctx.judge()`` makes; it grades nothing itself. See ARCHITECTURE.md, "Judge
criteria".
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evalport.protocol import AgentRun

from .._core import Trajectory, Turn
from . import _criteria as criteria
from ._base import Criterion, Judge
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


class _Made(JudgeCheck):
    """A judge object made from its criterion function (the class argument ``build=``):
    the function's arguments, then ``threshold=`` and ``judge=``; each argument is also an
    attribute of the object, by name."""

    build: ClassVar[Callable[..., Criterion]]
    _signature: ClassVar[inspect.Signature]  # build's, read once per class

    def __init_subclass__(cls, *, build: Callable[..., Criterion], **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.build = staticmethod(build)
        cls._signature = signature = inspect.signature(build)
        own = [
            inspect.Parameter(
                "threshold", inspect.Parameter.KEYWORD_ONLY, default=DEFAULT_THRESHOLD
            ),
            inspect.Parameter("judge", inspect.Parameter.KEYWORD_ONLY, default=None),
        ]
        cls.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*signature.parameters.values(), *own], return_annotation=None
        )

    def __init__(
        self,
        *args: Any,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Judge | None = None,
        **kwargs: Any,
    ) -> None:
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            setattr(self, name, value)
        super().__init__(self.build(*bound.args, **bound.kwargs), threshold=threshold, judge=judge)


class ClosedQA(_Made, build=criteria.closed_qa):
    """Does the output satisfy a yes/no requirement (``criteria.closed_qa``)?"""


class Factuality(_Made, build=criteria.factuality):
    """Is the output consistent with an expert answer (``criteria.factuality``)?"""


class Summarizes(_Made, build=criteria.summarizes):
    """Is the output a faithful summary of the source (``criteria.summarizes``)?"""


class SqlEquivalent(_Made, build=criteria.sql):
    """Is the output SQL equivalent to the reference query (``criteria.sql``)?"""


class Faithfulness(_Made, build=criteria.faithfulness):
    """Neuron's ``FaithfulnessJudge``: is every claim supported by ``context``
    (``criteria.faithfulness``)?"""


class Correctness(_Made, build=criteria.correctness):
    """Neuron's ``CorrectnessJudge``: does the output give the ``expected`` answer
    (``criteria.correctness``)?"""


class Relevance(_Made, build=criteria.relevance):
    """Neuron's ``RelevanceJudge``: does the output address ``question`` (default: the
    user's message; ``criteria.relevance``)?"""


class Helpfulness(_Made, build=criteria.helpfulness):
    """Neuron's ``HelpfulnessJudge``: is the output useful and actionable
    (``criteria.helpfulness``)?"""


class TaskCompletion(_Made, build=criteria.task_completion):
    """Neuron's ``TaskCompletionJudge``: was the user's ``goal`` achieved over the whole
    conversation (always reads the trajectory; ``criteria.task_completion``)?"""


class Custom(_Made, build=criteria.custom):
    """``criteria`` in your words, an optional ``reference`` and few-shot ``examples``
    (``criteria.custom``; Neuron's ``AgentJudge``)."""


class ClassifierJudge(_Made, build=criteria.classify):
    """Neuron's ``ClassifierJudge``: a yes/no ``question``, or ordered ``levels`` (worst
    first), scored from the answer distribution where the judge gives one
    (``criteria.classify``)."""
