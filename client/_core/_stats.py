"""Statistics of repeated trials and of run comparisons. Rules: see ARCHITECTURE.md,
"Statistics".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n`` (``(0, 1)`` when ``n == 0``)."""
    _check(successes, n)
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of ``k`` trials passes) from ``c`` of ``n``."""
    _check(c, n)
    _check_k(n, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(all ``k`` trials pass) (pass^k) from ``c`` of ``n``."""
    _check(c, n)
    _check_k(n, k)
    return math.comb(c, k) / math.comb(n, k)


def k_values(n: int) -> list[int]:
    """The ``k`` reported for ``n`` samples: 1, the powers of two below ``n``, and ``n``."""
    if n <= 0:
        return []
    values = {1, n}
    k = 2
    while k < n:
        values.add(k)
        k *= 2
    return sorted(values)


def flaky(successes: int, n: int) -> bool:
    """Some, but not all, samples passed."""
    _check(successes, n)
    return 0 < successes < n


def mean_std(values: Iterable[float]) -> tuple[float | None, float | None]:
    """Mean and population standard deviation; ``(None, None)`` for no values."""
    data = list(values)
    if not data:
        return None, None
    mean = sum(data) / len(data)
    variance = sum((value - mean) ** 2 for value in data) / len(data)
    return mean, math.sqrt(variance)


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values``; ``None`` for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"need 0 <= q <= 100, got {q}")
    data = sorted(values)
    if not data:
        return None
    rank = (len(data) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def fisher_exact(a_successes: int, a_n: int, b_successes: int, b_n: int) -> float:
    """Two-sided p-value of Fisher's exact test on two proportions."""
    _check(a_successes, a_n)
    _check(b_successes, b_n)
    total = a_n + b_n
    successes = a_successes + b_successes
    if total == 0:
        return 1.0
    denominator = math.comb(total, a_n)

    def probability(x: int) -> float:
        return math.comb(successes, x) * math.comb(total - successes, a_n - x) / denominator

    observed = probability(a_successes)
    low = max(0, a_n - (total - successes))
    high = min(a_n, successes)
    p = sum(
        value
        for value in (probability(x) for x in range(low, high + 1))
        if value <= observed * (1 + 1e-7)
    )
    return min(1.0, p)


def mcnemar_exact(worse: int, better: int) -> float:
    """Two-sided exact McNemar p-value from the counts of discordant pairs."""
    if worse < 0 or better < 0:
        raise ValueError("counts must not be negative")
    n = worse + better
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(worse, better) + 1)) / (1 << n)
    return min(1.0, 2 * tail)


EXACT_RANKS = 40
"""Up to this many values in all, :func:`rank_sum_greater` counts every arrangement."""


def rank_sum_greater(before: Sequence[float], after: Sequence[float]) -> float:
    """One-sided p-value that ``after`` tends to be larger than ``before`` (the
    Wilcoxon-Mann-Whitney rank-sum test; see ARCHITECTURE.md, "Statistics")."""
    n1, n2 = len(before), len(after)
    if not n1 or not n2:
        return 1.0
    pooled = sorted([(value, 0) for value in before] + [(value, 1) for value in after])
    doubled: list[int] = []  # each value's mid-rank, times two (whole numbers)
    start = 0
    while start < len(pooled):
        end = start
        while end + 1 < len(pooled) and pooled[end + 1][0] == pooled[start][0]:
            end += 1
        doubled += [start + end + 2] * (end - start + 1)
        start = end + 1
    observed = sum(rank for rank, (_, group) in zip(doubled, pooled, strict=True) if group)
    n = n1 + n2
    if n <= EXACT_RANKS:
        ways: list[dict[int, int]] = [{} for _ in range(n2 + 1)]
        ways[0][0] = 1
        for rank in doubled:
            for taken in range(n2, 0, -1):
                into = ways[taken]
                for total, count in ways[taken - 1].items():
                    into[total + rank] = into.get(total + rank, 0) + count
        at_least = sum(count for total, count in ways[n2].items() if total >= observed)
        return min(1.0, at_least / math.comb(n, n2))
    mean = n2 * (n + 1)  # of the doubled rank sum
    ties = sum(
        size**3 - size for size in (doubled.count(rank) for rank in set(doubled)) if size > 1
    )
    variance = 4 * n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    z = (observed - mean - 1) / math.sqrt(variance)  # continuity: half a rank, doubled
    return 0.5 * math.erfc(z / math.sqrt(2))


def _check(successes: int, n: int) -> None:
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")


def _check_k(n: int, k: int) -> None:
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k} with n={n}")
