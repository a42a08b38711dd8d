from dataclasses import dataclass, field

import pytest
from evalport.client._core._config import ConfigError
from evalport.client._core._selection import keyword_matcher, parse_shard, select


@dataclass
class Case:
    id: str
    tags: list[str] = field(default_factory=list)


CASES = [
    Case("evals/test_refund.py::refund_ok", ["refund", "smoke"]),
    Case("evals/test_refund.py::refund_rejected", ["refund", "approval"]),
    Case("evals/test_orders.py::lookup", ["orders", "smoke"]),
    Case("evals/test_orders.py::slow_export", ["orders", "slow"]),
]


def ids(cases):
    return [case.id.split("::")[1] for case in cases]


def test_tags_and_exclusions():
    assert ids(select(CASES, tags=["smoke"])) == ["refund_ok", "lookup"]
    assert ids(select(CASES, exclude_tags=["slow", "approval"])) == ["refund_ok", "lookup"]
    assert ids(select(CASES, tags=["orders"], exclude_tags=["slow"])) == ["lookup"]


def test_keyword_expressions():
    assert ids(select(CASES, keyword="refund and not rejected")) == ["refund_ok"]
    assert ids(select(CASES, keyword="(lookup or export) and orders")) == ["lookup", "slow_export"]
    assert ids(select(CASES, keyword="SMOKE")) == ["refund_ok", "lookup"]  # a tag, any case
    assert keyword_matcher("not x")("abc", frozenset())


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty"),
        ("a and", "expected a word"),
        ("(a or b", r"expected '\)'"),
        ("a b", "unexpected 'b'"),
    ],
)
def test_bad_keyword_expressions_name_the_problem(expression, message):
    with pytest.raises(ConfigError, match=message):
        keyword_matcher(expression)


def test_shards_cover_every_case_once():
    seen = []
    for number in (1, 2, 3):
        seen += ids(select(list(reversed(CASES)), shard=(number, 3)))
    assert sorted(seen) == sorted(ids(CASES))
    assert parse_shard(" 2/4 ") == (2, 4)
    for bad in ("0/3", "4/3", "x"):
        with pytest.raises(ConfigError, match="--shard"):
            parse_shard(bad)
