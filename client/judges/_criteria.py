"""Built-in criteria, one function each: the one definition of a criterion.

Rule: a criterion is its function here (a row of :data:`BUILTIN`); its ``t.judge()``
method and its judge object are made from that function, never written again. See
ARCHITECTURE.md, "Judge criteria".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._base import Criterion, Example


def _need(value: str | None, what: str, criterion: str) -> str:
    if value is None or not str(value).strip():
        raise ValueError(f"the {criterion} criterion needs a non-empty {what}")
    return str(value)


def _scope(trajectory: bool) -> str:
    return "trajectory" if trajectory else "output"


def closed_qa(question: str, *, trajectory: bool = False) -> Criterion:
    """Does the output satisfy a yes/no requirement about it?"""
    question = _need(question, "question", "closed_qa")
    return Criterion(
        name="closed_qa",
        instructions=(
            f"Answer this question about the output: {question}\n"
            "Score 1 if the answer is clearly yes, 0 if it is no; use values in between only "
            "when the output meets the requirement in part."
        ),
        scope=_scope(trajectory),
    )


def factuality(reference: str, *, trajectory: bool = False) -> Criterion:
    """Is the output consistent with an expert reference answer?"""
    return Criterion(
        name="factuality",
        instructions=(
            "Compare the factual content of the output with the expert answer. Differences of "
            "style, length or wording do not matter. Score 1 if every fact in the output "
            "agrees with the expert answer (a subset or a consistent superset is fine), 0.5 "
            "if it leaves out facts the question needs, 0 if any fact contradicts it."
        ),
        reference=_need(reference, "reference", "factuality"),
        reference_label="expert answer",
        scope=_scope(trajectory),
    )


def summarizes(source: str, *, trajectory: bool = False) -> Criterion:
    """Is the output a faithful, complete summary of the source?"""
    return Criterion(
        name="summarizes",
        instructions=(
            "Judge the output as a summary of the source text. It must be shorter than the "
            "source, state nothing the source does not support, and keep the source's main "
            "points. Score 1 for an accurate summary that keeps every main point, lower for "
            "missing points, 0 for anything unsupported or contradicted."
        ),
        reference=_need(source, "source text", "summarizes"),
        reference_label="source text",
        scope=_scope(trajectory),
    )


def sql(reference: str, *, trajectory: bool = False) -> Criterion:
    """Is the output SQL equivalent to the reference query?"""
    return Criterion(
        name="sql",
        instructions=(
            "The output is an SQL query. Decide whether it returns the same result as the "
            "reference query on every database with the same schema (aliases, formatting, "
            "join order and equivalent predicates do not matter). Score 1 if equivalent, 0 if "
            "not; the output may contain only the query or a query in a code block."
        ),
        reference=_need(reference, "reference query", "sql"),
        reference_label="reference query",
        scope=_scope(trajectory),
    )


def faithfulness(context: str, *, trajectory: bool = False) -> Criterion:
    """Is every claim in the output supported by the given context?"""
    return Criterion(
        name="faithfulness",
        instructions=(
            "Check every claim the output makes against the context. Score the share of "
            "claims the context supports: 1 if all are supported, 0 if the output is mostly "
            "invented. Claims that contradict the context weigh more than unsupported ones."
        ),
        reference=_need(context, "context", "faithfulness"),
        reference_label="context",
        scope=_scope(trajectory),
    )


def correctness(expected: str, *, trajectory: bool = False) -> Criterion:
    """Does the output give the expected answer?"""
    return Criterion(
        name="correctness",
        instructions=(
            "Decide whether the output gives the expected answer. Wording may differ; the "
            "substance must match. Score 1 if correct and complete, in between if partly "
            "correct or incomplete, 0 if wrong."
        ),
        reference=_need(expected, "expected answer", "correctness"),
        reference_label="expected answer",
        scope=_scope(trajectory),
    )


def relevance(question: str | None = None, *, trajectory: bool = False) -> Criterion:
    """Does the output address the question (the user's input when none is given)?"""
    return Criterion(
        name="relevance",
        instructions=(
            "Decide whether the output addresses the question it answers, without drifting "
            "to other topics. Score 1 if it is on point, 0 if it ignores the question."
        ),
        reference=question if question and question.strip() else None,
        reference_label="question",
        scope=_scope(trajectory),
    )


def helpfulness(*, trajectory: bool = False) -> Criterion:
    """Is the output useful and actionable for the user?"""
    return Criterion(
        name="helpfulness",
        instructions=(
            "Judge how helpful the output is to the user who wrote the input: does it "
            "resolve their need, with accurate and actionable content, at a suitable length "
            "and tone? Score 1 for an answer the user could act on at once, 0 for one that "
            "does not help."
        ),
        scope=_scope(trajectory),
    )


def task_completion(goal: str) -> Criterion:
    """Did the assistant achieve the user's goal over the whole conversation?"""
    return Criterion(
        name="task_completion",
        instructions=(
            "Read the whole conversation and decide how far the assistant achieved the "
            "user's goal, using the tools it called and their results, not only its final "
            "words. Approval decisions are made by a human approver, not by the assistant: "
            "when an action was rejected, do not count the rejection against the assistant; "
            "judge how it handled it (it should not retry the rejected action or claim it "
            "happened, and it should explain and offer what it still can). Score 1 if the "
            "goal was achieved or, where an approval was rejected, the rejection was handled "
            "well; 0 if the assistant failed the goal or misreported what happened."
        ),
        reference=_need(goal, "goal", "task_completion"),
        reference_label="user goal",
        scope="trajectory",
    )


def _examples(examples: Iterable[Example | Mapping[str, Any]]) -> tuple[Example, ...]:
    built = []
    for number, example in enumerate(examples, 1):
        if isinstance(example, Example):
            item = example
        else:
            try:
                item = Example(
                    output=str(example["output"]),
                    score=float(example["score"]),
                    reason=str(example.get("reason", "")),
                    input=example.get("input"),
                )
            except KeyError as error:
                raise ValueError(
                    f"few-shot example {number} needs an 'output' and a 'score'"
                ) from error
        if not 0.0 <= item.score <= 1.0:
            raise ValueError(f"few-shot example {number} has score {item.score} outside [0, 1]")
        built.append(item)
    return tuple(built)


def custom(
    criteria: str,
    *,
    examples: Iterable[Example | Mapping[str, Any]] = (),
    reference: str | None = None,
    reference_label: str = "reference",
    trajectory: bool = False,
    name: str = "custom",
) -> Criterion:
    """A criterion in your own words, with optional few-shot examples.

    ``examples`` are :class:`Example` or mappings with ``output``, ``score`` and optional
    ``reason``/``input``. ``trajectory=True`` shows the judge the whole conversation.
    """
    return Criterion(
        name=name,
        instructions=_need(criteria, "criteria text", "custom"),
        examples=_examples(examples),
        reference=reference,
        reference_label=reference_label,
        scope=_scope(trajectory),
    )


def classify(
    question: str,
    levels: Sequence[str] | None = None,
    *,
    reference: str | None = None,
    reference_label: str = "reference",
    trajectory: bool = False,
    name: str = "classify",
) -> Criterion:
    """A classifier criterion: a yes/no question, or ordered ``levels`` (worst first)."""
    chosen = tuple(levels) if levels is not None else ("no", "yes")
    if not 2 <= len(chosen) <= 10:
        raise ValueError(f"a classifier needs 2 to 10 levels, got {len(chosen)}")
    return Criterion(
        name=name,
        instructions=_need(question, "question", "classify"),
        levels=chosen,
        reference=reference,
        reference_label=reference_label,
        scope=_scope(trajectory),
    )


BUILTIN: dict[str, Callable[..., Criterion]] = {
    "closed_qa": closed_qa,
    "factuality": factuality,
    "summarizes": summarizes,
    "sql": sql,
    "faithfulness": faithfulness,
    "correctness": correctness,
    "relevance": relevance,
    "helpfulness": helpfulness,
    "task_completion": task_completion,
    "custom": custom,
    "classify": classify,
}
"""Criteria by name (for configuration files and ``evalport judge calibrate``)."""
