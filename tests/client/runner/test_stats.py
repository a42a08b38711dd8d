import math
from itertools import combinations

import pytest
from evalport.client._core._stats import (
    fisher_exact,
    flaky,
    k_values,
    mcnemar_exact,
    mean_std,
    pass_at_k,
    pass_hat_k,
    wilson,
)
from hypothesis import given
from hypothesis import strategies as st


def test_wilson_known_values():
    # 8 of 10 -> (0.4902, 0.9433) (Wilson 1927; as tabulated by Newcombe 1998)
    low, high = wilson(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0
    assert wilson(10, 10)[1] == 1.0
    assert wilson(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_estimate(pair):
    c, n = pair
    low, high = wilson(c, n)
    assert 0.0 <= low <= c / n <= high <= 1.0


def _brute_pass_at_k(outcomes, k):
    subsets = list(combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets), sum(all(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(("n", "c"), [(5, 0), (5, 2), (5, 5), (6, 3), (4, 1)])
def test_pass_at_k_and_pass_hat_k_are_the_subset_averages(n, c):
    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        at, hat = _brute_pass_at_k(outcomes, k)
        assert pass_at_k(n, c, k) == pytest.approx(at)
        assert pass_hat_k(n, c, k) == pytest.approx(hat)


def test_estimator_edges_and_errors():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_hat_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 9, 2) == 1.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="successes"):
        wilson(4, 3)


def test_k_values_flaky_mean_std():
    assert k_values(1) == [1]
    assert k_values(10) == [1, 2, 4, 8, 10]
    assert k_values(0) == []
    assert flaky(1, 3) and not flaky(0, 3) and not flaky(3, 3)
    assert mean_std([]) == (None, None)
    mean, std = mean_std([0.5, 1.0])
    assert (mean, std) == (0.75, 0.25)


def test_fisher_exact_matches_reference():
    # Fisher's tea-tasting table [[3, 1], [1, 3]]: two-sided p = 0.4857
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(0.4857, abs=1e-4)
    # [[10, 0], [2, 8]] -> 0.0007 (scipy.stats.fisher_exact)
    assert fisher_exact(10, 10, 2, 10) == pytest.approx(0.000714, abs=1e-5)
    assert fisher_exact(5, 10, 5, 10) == pytest.approx(1.0)
    assert fisher_exact(0, 0, 0, 0) == 1.0


def test_mcnemar_exact():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(1, 9) == pytest.approx(2 * 11 / 1024)
    assert math.isclose(mcnemar_exact(9, 1), mcnemar_exact(1, 9))
