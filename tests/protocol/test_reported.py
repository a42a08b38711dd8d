"""The shared readers of reported values: one rule for the adapters and chat history."""

from __future__ import annotations

import pytest
from evalport.protocol import Usage
from evalport.protocol._reported import arguments_of, step_usage


@pytest.mark.parametrize(
    ("raw", "wrapped", "kept"),
    [
        ('{"a": 1}', {"a": 1}, {"a": 1}),
        ("[1, 2]", {"value": [1, 2]}, "[1, 2]"),
        ("{not json", {"value": "{not json"}, "{not json"),
        ({"k": "v"}, {"k": "v"}, {"k": "v"}),
        (None, {}, {}),
        ("", {}, {}),
    ],
)
def test_text_that_holds_no_object_is_wrapped_or_kept(
    raw: object, wrapped: object, kept: object
) -> None:
    assert arguments_of(raw) == wrapped
    assert arguments_of(raw, keep_text=True) == kept


def test_inclusive_counts_become_disjoint_usage() -> None:
    assert step_usage(10, 5, cache_read=4, reasoning=2) == Usage(
        input=6, output=3, cache_read=4, reasoning=2
    )
