"""Built-in criteria: each returns a :class:`Criterion` for any judge.

The catalogue as a namespace: ``criteria.factuality(expert_answer)`` and so on; each
function returns a :class:`~evalport.client.judges.Criterion`.
"""

from ._criteria import (
    BUILTIN,
    classify,
    closed_qa,
    correctness,
    custom,
    factuality,
    faithfulness,
    helpfulness,
    relevance,
    sql,
    summarizes,
    task_completion,
)

__all__ = [
    "BUILTIN",
    "classify",
    "closed_qa",
    "correctness",
    "custom",
    "factuality",
    "faithfulness",
    "helpfulness",
    "relevance",
    "sql",
    "summarizes",
    "task_completion",
]
