"""Results: of one assertion, of one trial of a case, of a case over its trials; every
verdict is decided here. Result Structs hold JSON-like data only (``gc=False``). Rules:
see ARCHITECTURE.md, "Verdicts".
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import msgspec

from ._stats import wilson

Severity = Literal["gate", "soft"]


class Verdict:
    """The five outcomes, kept distinct everywhere."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    SCORED = "scored"
    ALL = (PASSED, FAILED, ERROR, SKIPPED, SCORED)


class AssertionResult(msgspec.Struct, kw_only=True, gc=False):
    """The outcome of evaluating one assertion."""

    name: str
    score: float
    passed: bool
    message: str = ""
    severity: Severity = "gate"
    threshold: float = 1.0
    label: str | None = None
    evaluated: bool = True
    context: dict[str, Any] = msgspec.field(default_factory=dict)
    location: str | None = None  # file:line of the eval code that made it

    @property
    def failed_gate(self) -> bool:
        return self.severity == "gate" and not self.passed

    @property
    def failed_soft(self) -> bool:
        return self.severity == "soft" and not self.passed


class JudgeToolCall(msgspec.Struct, kw_only=True, gc=False):
    """One read an agent-loop judge made (its own call, never one of the agent's): the
    tool, its arguments, how many characters it returned, and an error if it failed."""

    tool: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    chars: int = 0
    error: str | None = None


class JudgeRecord(msgspec.Struct, kw_only=True, gc=False):
    """What one judge call saw and said (kept for reports, redacted like the run).

    ``tool_calls`` and ``steps`` are an agent-loop judge's own reads and model calls,
    kept apart from the agent's tool calls; its tokens are the judge's, never the agent's.
    A classifier's record keeps its question, reference, levels and answer distribution.
    """

    criterion: str
    score: float | None
    reason: str = ""
    evidence: list[str] = msgspec.field(default_factory=list)  # what the judge quoted
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached: bool = False
    error: str | None = None
    tool_calls: list[JudgeToolCall] = msgspec.field(default_factory=list)
    steps: int = 0
    question: str | None = None  # a classifier's question (its rubric), as asked
    reference: str | None = None  # what a classifier compared with, when given
    levels: list[str] | None = None  # a classifier's levels, worst first
    probabilities: list[float] | None = None  # its answer distribution, when it had one


class _UsageOnly(msgspec.Struct):
    usage: Any = None


_USAGE = msgspec.json.Decoder(_UsageOnly)


class _ReplyOnly(msgspec.Struct):
    reply: Any = None


_REPLY = msgspec.json.Decoder(_ReplyOnly)


class RunData(Mapping[str, Any]):
    """A trial's redacted run as plain JSON data, kept as its JSON text (see
    ARCHITECTURE.md, "Verdicts").

    It reads like the dict ``msgspec.to_builtins(run)`` gives (``data["turns"]``,
    ``data.get("usage")``, equality with dicts) but cannot be changed. ``raw`` is the
    text as a :class:`msgspec.Raw`, for embedding in encoded output unchanged.
    """

    __slots__ = ("_data", "json")

    def __init__(self, json: bytes) -> None:
        self.json = json
        self._data: dict[str, Any] | None = None

    @classmethod
    def of(cls, run: Any) -> RunData:
        """The JSON data of ``run`` (an AgentRun, or anything msgspec encodes)."""
        return cls(msgspec.json.encode(run))

    @property
    def raw(self) -> msgspec.Raw:
        return msgspec.Raw(self.json)

    def data(self) -> dict[str, Any]:
        """The decoded data (decoded once, then kept)."""
        if self._data is None:
            data = msgspec.json.decode(self.json)
            if not isinstance(data, dict):
                raise TypeError(f"a run is a JSON object, not {type(data).__name__}")
            self._data = data
        return self._data

    def usage(self) -> Any:
        """The run's ``usage`` entry, without decoding the rest when not decoded yet."""
        if self._data is not None:
            return self._data.get("usage")
        return _USAGE.decode(self.json).usage

    def reply(self) -> Any:
        """The run's ``reply`` entry (the agent's final reply), decoding nothing else."""
        if self._data is not None:
            return self._data.get("reply")
        return _REPLY.decode(self.json).reply

    def __getitem__(self, key: str) -> Any:
        return self.data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data())

    def __len__(self) -> int:
        return len(self.data())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunData):
            return self.json == other.json or self.data() == other.data()
        if isinstance(other, Mapping):
            return self.data() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to dicts, which are unhashable

    def __repr__(self) -> str:
        return f"RunData({self.data()!r})"


def enc_hook(value: Any) -> Any:
    """An ``enc_hook`` for msgspec that encodes :class:`RunData` as its data, so results
    that hold runs encode (``msgspec.json.encode(result, enc_hook=enc_hook)``)."""
    if isinstance(value, RunData):
        return value.data()
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


class TurnTiming(msgspec.Struct, kw_only=True, gc=False):
    """When one turn's answer came, in seconds after its request left, by the client's
    clock: ``first_event`` and ``first_token`` (the first text of the reply) only when
    the turn streamed (:mod:`evalport.protocol._stream`; ``LocalTarget`` always),
    ``total`` when the whole answer was in."""

    turn: int
    total: float
    first_event: float | None = None
    first_token: float | None = None


class TrialResult(msgspec.Struct, kw_only=True, gc=False):
    """One execution of a case."""

    case_id: str
    trial: int = 0
    verdict: str = Verdict.PASSED
    assertions: tuple[AssertionResult, ...] = ()
    error: str | None = None
    error_type: str | None = None
    traceback: str | None = None  # of the error in the eval code, for the JSON reports
    skip_reason: str | None = None
    duration: float = 0.0
    session_id: str | None = None
    cached: bool = False
    judges: tuple[JudgeRecord, ...] = ()
    logs: list[str] = msgspec.field(default_factory=list)
    output: Any = None  # what the case recorded (an evaluator's run() result), JSON data
    run: Any = None  # the redacted AgentRun as RunData (plain JSON data), for reports
    timings: tuple[TurnTiming, ...] = ()  # each turn's, in order


class CaseResult(msgspec.Struct, kw_only=True, gc=False):
    """A case over all its trials."""

    case_id: str
    description: str = ""
    tags: tuple[str, ...] = ()
    verdict: str = Verdict.PASSED
    row: dict[str, Any] | None = None  # the dataset row the case was expanded from
    trials: list[TrialResult] = msgspec.field(default_factory=list)
    pass_rate: float = 1.0
    required: int = 1
    passes: int = 0


def trial_verdict(
    assertions: list[AssertionResult], *, error: bool = False, skipped: bool = False
) -> str:
    """A trial's verdict from its assertions (see ARCHITECTURE.md, "Verdicts")."""
    if error:
        return Verdict.ERROR
    failed_soft = judge_down = False
    for result in assertions:  # one pass: this runs once per trial
        if result.passed:
            continue
        if not result.evaluated and "judge_error" in result.context:
            judge_down = True
        elif result.severity == "gate":
            return Verdict.FAILED
        else:
            failed_soft = failed_soft or result.severity == "soft"
    if judge_down:
        return Verdict.ERROR
    if skipped:
        return Verdict.SKIPPED
    return Verdict.SCORED if failed_soft else Verdict.PASSED


def required_passes(trials: int, pass_rate: float) -> int:
    """How many passed trials a case of ``trials`` repetitions needs."""
    if trials <= 0:
        return 0
    return min(max(math.ceil(pass_rate * trials - 1e-9), 1), trials)


def case_verdict(
    verdicts: list[str], pass_rate: float = 1.0, min_lower_bound: float | None = None
) -> str:
    """A case's verdict over its trials' verdicts, the ``min_lower_bound`` gate included."""
    verdict = _repeated_verdict(verdicts, pass_rate)
    if verdict == Verdict.PASSED and lower_bound_miss(verdicts, min_lower_bound):
        return Verdict.FAILED
    return verdict


def lower_bound_miss(verdicts: list[str], min_lower_bound: float | None) -> str | None:
    """Why a case's trials fail the ``min_lower_bound`` gate, or ``None`` when they pass it."""
    samples = [verdict for verdict in verdicts if verdict != Verdict.SKIPPED]
    if min_lower_bound is None or not samples:
        return None
    low, _ = wilson(samples.count(Verdict.PASSED), len(samples))
    if low >= min_lower_bound:
        return None
    return f"Wilson lower bound {low:.3f} is below the required {min_lower_bound:.3f}"


def _repeated_verdict(verdicts: list[str], pass_rate: float) -> str:
    """A case's verdict over its trials' verdicts, before the lower bound gate.

    With one trial the trial's verdict stands. With several, the case passes when enough
    trials passed; otherwise it is ``error`` when every trial that missed was an error
    (the agent was never really judged), else ``failed``.
    """
    if len(verdicts) == 1:
        return verdicts[0]
    if not verdicts or all(verdict == Verdict.SKIPPED for verdict in verdicts):
        return Verdict.SKIPPED
    passes = sum(verdict == Verdict.PASSED for verdict in verdicts)
    if passes >= required_passes(len(verdicts), pass_rate):
        return Verdict.PASSED
    misses = [v for v in verdicts if v not in (Verdict.PASSED, Verdict.SKIPPED)]
    if misses and all(verdict == Verdict.ERROR for verdict in misses):
        return Verdict.ERROR
    return Verdict.FAILED
