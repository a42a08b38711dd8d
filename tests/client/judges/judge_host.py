"""A minimal eval context as the judges see it (the JudgeHost protocol)."""

from __future__ import annotations

from typing import Any

from evalport.client import JudgeRecord, Turn
from evalport.protocol import AgentRun


class Host:
    """A minimal eval context as the judges see it (the JudgeHost protocol)."""

    def __init__(self, judge: Any = None, *, strict: bool = False) -> None:
        self.run = AgentRun()
        self.turns: list[Turn] = []
        self.case_judge = judge
        self.strict = strict
        self.registered: list[Any] = []
        self.judge_records: list[JudgeRecord] = []

    def register(self, expectation: Any) -> None:
        self.registered.append(expectation)

    def record_judge(self, record: JudgeRecord) -> None:
        self.judge_records.append(record)

    def add_turn(self, message: str, run: AgentRun) -> Turn:
        turn = Turn(
            index=len(self.turns) + 1,
            message=message,
            run=run,
            steps=run.steps_of_turn(len(self.turns) + 1),
        )
        self.turns.append(turn)
        self.run = run
        return turn
