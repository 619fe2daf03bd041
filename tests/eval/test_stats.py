"""Bootstrap intervals and paired tests over per-question scores."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ctxr.eval.stats import (
    bootstrap_interval,
    paired_test,
    questions_needed,
    sign_flip_p_value,
)


def test_the_interval_holds_the_mean_and_depends_only_on_the_seed() -> None:
    values = [1.0] * 30 + [0.0] * 10
    first = bootstrap_interval(values, resamples=500, seed=7)
    assert first == bootstrap_interval(values, resamples=500, seed=7)
    assert first.mean == 0.75
    assert first.low < 0.75 < first.high
    assert first.low > 0.55 and first.high < 0.9  # about 0.75 +- 2 standard errors (0.068)
    assert bootstrap_interval([0.5] * 8, resamples=100).low == 0.5


def test_the_exact_sign_flip_p_value_counts_every_pattern() -> None:
    # Three questions each one better: 2 of the 8 sign patterns reach |sum| 3.
    assert sign_flip_p_value([1.0, 1.0, 1.0, 0.0, 0.0]) == (0.25, True)
    assert sign_flip_p_value([0.0, 0.0]) == (1.0, True)
    # Balanced differences: the observed mean 0 is met by every pattern.
    assert sign_flip_p_value([1.0, -1.0])[0] == 1.0


def test_the_monte_carlo_p_value_agrees_with_the_exact_one() -> None:
    rng = random.Random(3)
    diffs = [rng.choice([1.0, 0.5, -1.0]) for _ in range(18)]  # past EXACT_MAX
    p, exact = sign_flip_p_value(diffs, resamples=20_000, seed=1)
    assert not exact
    # Every one of the 2^18 sign patterns, counted here the slow way.
    patterns = np.arange(2**18)[:, None]
    signs = 1 - 2 * ((patterns >> np.arange(18)) & 1)
    sums = np.abs((signs * np.array(diffs)).sum(axis=1))
    truth = float(np.mean(sums >= abs(sum(diffs)) - 1e-12))
    assert p == pytest.approx(truth, abs=0.01)


def test_a_paired_test_sees_a_consistent_gain_and_not_noise() -> None:
    better = paired_test([1.0] * 30 + [0.0] * 10, [0.0] * 20 + [1.0] * 10 + [0.0] * 10,
                         resamples=1000)  # fmt: skip
    assert better.difference == 0.5 and better.significant
    assert better.low > 0 and better.differing == 20
    same = paired_test([1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0], resamples=1000)
    assert same.difference == 0 and not same.significant and same.p_value == 1.0
    with pytest.raises(ValueError, match="4 scores against 3"):
        paired_test([1.0] * 4, [1.0] * 3)


def test_questions_needed_grows_as_the_difference_shrinks() -> None:
    small = questions_needed([1.0] * 2 + [-1.0] * 1 + [0.0] * 37)
    large = questions_needed([1.0] * 10 + [0.0] * 30)
    assert small is not None and large is not None and small > large
    assert questions_needed([0.0, 1.0, -1.0]) is None  # no difference to show
