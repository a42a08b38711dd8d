"""Judge calibration: how far a judge agrees with human labels.

Rule: nothing is judged until every labelled line is valid; an example the judge could
not grade is an error, never agreement. See ARCHITECTURE.md, "Judge calibration".
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from ._base import Criterion, Judge, JudgeRequest, JudgeUsage
from ._criteria import BUILTIN


class LabelledExample(msgspec.Struct, frozen=True, kw_only=True):
    """One line of a labels file."""

    line: int
    output: str
    label: float
    criterion: Criterion
    input: str | None = None


class CalibrationReport(msgspec.Struct, kw_only=True):
    """Agreement of a judge with human labels."""

    examples: int
    judged: int
    threshold: float
    graded: bool
    accuracy: float | None = None
    kappa: float | None = None
    spearman: float | None = None
    best_threshold: float | None = None
    best_accuracy: float | None = None
    best_kappa: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    errors: list[str] = msgspec.field(default_factory=list)
    scores: list[float | None] = msgspec.field(default_factory=list)


def _criterion(row: dict[str, Any], where: str, default: str | None) -> Criterion:
    kind = row.get("kind", "custom")
    builder = BUILTIN.get(kind) if isinstance(kind, str) else None
    if builder is None:
        raise ValueError(f"{where}: field 'kind' must be one of {', '.join(BUILTIN)}; got {kind!r}")
    if kind == "custom" and "criteria" not in row:
        if default is None:
            raise ValueError(f"{where}: no criterion: add a 'criteria' field or pass --criterion")
        row = {**row, "criteria": default}
    parameters = inspect.signature(builder).parameters
    arguments = {name: row[name] for name in parameters if name in row}
    for name, parameter in parameters.items():
        required = parameter.default is inspect.Parameter.empty
        if required and parameter.kind is not parameter.KEYWORD_ONLY and name not in row:
            raise ValueError(f"{where}: field {name!r} is required for kind {kind!r}")
    try:
        return builder(**arguments)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None


def load_labels(path: str | Path, *, default_criterion: str | None = None) -> list[LabelledExample]:
    """Read and validate a labels file (ARCHITECTURE.md, "Judge calibration")."""
    examples = []
    text = Path(path).read_text(encoding="utf-8")
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = msgspec.json.decode(raw)
        except msgspec.DecodeError as error:
            raise ValueError(f"{where}: not valid JSON ({error})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where}: each line must be a JSON object")
        output = row.get("output")
        if not isinstance(output, str):
            raise ValueError(f"{where}: field 'output' (a string) is required")
        label = row.get("label")
        if isinstance(label, bool):
            label = float(label)
        if not isinstance(label, int | float) or not 0.0 <= label <= 1.0:
            raise ValueError(f"{where}: field 'label' must be true/false or a number in [0, 1]")
        given = row.get("input")
        examples.append(
            LabelledExample(
                line=number,
                output=output,
                label=float(label),
                criterion=_criterion(row, where, default_criterion),
                input=given if isinstance(given, str) else None,
            )
        )
    if not examples:
        raise ValueError(f"{path}: no labelled examples")
    return examples


def cohen_kappa(first: Sequence[bool], second: Sequence[bool]) -> float:
    """Cohen's kappa of two raters' pass/fail decisions."""
    n = len(first)
    if n == 0 or n != len(second):
        raise ValueError("kappa needs two equally long, non-empty sequences")
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    yes_a, yes_b = sum(first) / n, sum(second) / n
    expected = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    if expected >= 1.0:
        return 1.0 if observed >= 1.0 else 0.0
    return (observed - expected) / (1 - expected)


def _ranks(values: Sequence[float]) -> list[float]:
    """Each value's rank from 1; tied values share the mean of their ranks."""
    ordered = sorted(values)
    return [(bisect_left(ordered, v) + bisect_right(ordered, v) + 1) / 2 for v in values]


def spearman(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); ``None`` when undefined."""
    if len(first) != len(second) or len(first) < 2:
        return None
    try:  # Pearson's correlation of the ranks
        return statistics.correlation(_ranks(first), _ranks(second))
    except statistics.StatisticsError:  # a constant sequence
        return None


def _agreement(
    scores: Sequence[float], human: Sequence[bool], threshold: float
) -> tuple[float, float]:
    judged = [score >= threshold for score in scores]
    accuracy = sum(a == b for a, b in zip(judged, human, strict=True)) / len(human)
    return accuracy, cohen_kappa(judged, human)


def best_threshold(scores: Sequence[float], human: Sequence[bool]) -> tuple[float, float, float]:
    """``(threshold, accuracy, kappa)`` of the threshold that best separates the labels."""
    distinct = sorted(set(scores))
    candidates = [distinct[0]] + [(a + b) / 2 for a, b in itertools.pairwise(distinct)]
    rows = [(candidate, *_agreement(scores, human, candidate)) for candidate in candidates]
    return max(rows, key=lambda row: (row[2], row[1]))  # the first, so the lowest, of ties


async def calibrate(
    judge: Judge,
    examples: Sequence[LabelledExample],
    *,
    threshold: float = 0.7,
    label_threshold: float = 0.5,
    concurrency: int = 4,
) -> CalibrationReport:
    """Judge every example (at most ``concurrency`` at once) and measure agreement."""
    gate = asyncio.Semaphore(max(1, concurrency))
    usage = JudgeUsage()
    errors: list[str] = []

    async def grade(example: LabelledExample) -> float | None:
        nonlocal usage
        request = JudgeRequest(
            criterion=example.criterion, output=example.output, input=example.input
        )
        async with gate:
            try:
                verdict = await judge.judge(request)
            except Exception as error:
                errors.append(f"line {example.line}: {type(error).__name__}: {error}")
                return None
        usage = usage + verdict.usage
        return verdict.score

    scores = list(await asyncio.gather(*(grade(example) for example in examples)))
    pairs = [(s, e.label) for s, e in zip(scores, examples, strict=True) if s is not None]
    graded = any(example.label not in (0.0, 1.0) for example in examples)
    report = CalibrationReport(
        examples=len(examples),
        judged=len(pairs),
        threshold=threshold,
        graded=graded,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        errors=sorted(errors),
        scores=scores,
    )
    if pairs:
        judged = [score for score, _ in pairs]
        human = [label >= label_threshold for _, label in pairs]
        report.accuracy, report.kappa = _agreement(judged, human, threshold)
        report.best_threshold, report.best_accuracy, report.best_kappa = best_threshold(
            judged, human
        )
        if graded:
            report.spearman = spearman(judged, [label for _, label in pairs])
    return report


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def format_report(report: CalibrationReport) -> str:
    """The report as a few human-readable lines."""
    lines = [
        f"examples: {report.examples} judged: {report.judged} errors: {len(report.errors)}",
        f"at threshold {report.threshold:g}: accuracy {_number(report.accuracy)}, "
        f"Cohen's kappa {_number(report.kappa)}",
    ]
    if report.graded:
        lines.append(f"Spearman correlation (graded labels): {_number(report.spearman)}")
    if report.best_threshold is not None:
        lines.append(
            f"best threshold {report.best_threshold:.3f}: accuracy "
            f"{_number(report.best_accuracy)}, Cohen's kappa {_number(report.best_kappa)}"
        )
    lines.append(f"judge tokens: {report.input_tokens} in, {report.output_tokens} out")
    lines += [f"error {error}" for error in report.errors]
    return "\n".join(lines)
