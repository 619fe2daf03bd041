"""How sure a score over a few dozen questions is: bootstrap intervals and paired tests.

A trial's questions are a sample, and its scores are means over them. Resampling the
questions with replacement says how far a mean could move with other questions of the same
kind (`bootstrap_interval`, a percentile interval). Two configurations answer the *same*
questions, so they are compared question by question (`paired_test`): the bootstrap of the
mean per-question difference gives its interval, and a sign-flip permutation test its p-value
(under "no difference", each question's difference is as likely to have had the other sign).
The permutation test is exact (every sign pattern) while the differing questions are few, and
Monte Carlo past that.

Pure and seeded: the same values and seed give the same numbers, on any machine (numpy's
PCG64). Intervals of several rows drawn with one seed resample the same questions, so their
widths can be compared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95
#: Up to this many differing questions the permutation test enumerates every sign pattern.
EXACT_MAX = 16
# Scores are means of fractions; a permuted statistic this close to the observed one ties it.
_TIE = 1e-12


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean and its bootstrap interval at `level` (fractions, like the scores)."""

    mean: float
    low: float
    high: float

    def to_json(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


@dataclass(frozen=True, slots=True)
class PairedTest:
    """A - B over the same questions: the mean difference, its interval, the p-value."""

    difference: float
    low: float
    high: float
    p_value: float
    questions: int
    differing: int  # questions on which A and B scored differently
    exact: bool  # the p-value enumerates every sign pattern (else Monte Carlo)
    level: float

    @property
    def significant(self) -> bool:
        """The difference is larger than the noise at the interval's level."""
        return self.p_value < 1.0 - self.level

    def to_json(self) -> dict[str, object]:
        return {
            "difference": self.difference,
            "low": self.low,
            "high": self.high,
            "p_value": self.p_value,
            "questions": self.questions,
            "differing": self.differing,
            "exact": self.exact,
            "significant": self.significant,
        }


def _array(values: Sequence[float], what: str) -> npt.NDArray[np.float64]:
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1 or data.size == 0:
        raise ValueError(f"{what}: need at least one value")
    return data


def _check(resamples: int, level: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie between 0 and 1, got {level}")


def _resampled_means(
    data: npt.NDArray[np.float64], resamples: int, seed: int
) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.size, size=(resamples, data.size))
    means: npt.NDArray[np.float64] = data[picks].mean(axis=1)
    return means


def _bounds(means: npt.NDArray[np.float64], level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_interval(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> Interval:
    """The mean of `values` (one score per question) and its percentile bootstrap interval."""
    _check(resamples, level)
    data = _array(values, "bootstrap_interval")
    low, high = _bounds(_resampled_means(data, resamples, seed), level)
    return Interval(float(data.mean()), low, high)


def sign_flip_p_value(
    differences: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[float, bool]:
    """Two-sided p-value of a mean difference of 0, and whether it is exact.

    Questions with no difference do not change the statistic under any flip and are left out;
    with none left the p-value is 1. A Monte Carlo p-value counts the observed pattern as one
    of the draws ((hits + 1) / (draws + 1)), so it is never 0.
    """
    data = _array(differences, "sign_flip_p_value")
    nonzero = data[np.abs(data) > _TIE]
    if nonzero.size == 0:
        return 1.0, True
    observed = abs(float(nonzero.sum()))
    if nonzero.size <= EXACT_MAX:
        # Every sign pattern: bit j of pattern i says whether difference j flips.
        patterns = np.arange(2**nonzero.size, dtype=np.int64)[:, None]
        bits = (patterns >> np.arange(nonzero.size, dtype=np.int64)) & 1
        sums = ((1 - 2 * bits) * nonzero).sum(axis=1)
        return float(np.mean(np.abs(sums) >= observed - _TIE)), True
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, nonzero.size))
    sums = (signs * nonzero).sum(axis=1)
    hits = int(np.count_nonzero(np.abs(sums) >= observed - _TIE))
    return (hits + 1) / (resamples + 1), False


def paired_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> PairedTest:
    """A against B, question by question (`a[i]` and `b[i]` score the same question)."""
    _check(resamples, level)
    first, second = _array(a, "paired_test"), _array(b, "paired_test")
    if first.size != second.size:
        raise ValueError(f"paired_test: {first.size} scores against {second.size}")
    differences = first - second
    low, high = _bounds(_resampled_means(differences, resamples, seed), level)
    p_value, exact = sign_flip_p_value(differences.tolist(), resamples=resamples, seed=seed)
    differing = int(np.count_nonzero(np.abs(differences) > _TIE))
    return PairedTest(
        float(differences.mean()), low, high, p_value, int(first.size), differing, exact, level
    )


def questions_needed(
    differences: Sequence[float], *, level: float = DEFAULT_LEVEL, power: float = 0.8
) -> int | None:
    """About how many questions a test at `level` needs to show a mean difference of this size
    with probability `power`, by the normal approximation n = ((z_a + z_b) * sd / mean)^2: a
    rough guide to sizing the next trial. None when there is no difference to show (mean 0)
    or no spread to size it by."""
    data = _array(differences, "questions_needed")
    mean = float(data.mean())
    spread = float(data.std(ddof=1)) if data.size > 1 else 0.0
    if abs(mean) <= _TIE or spread <= _TIE:
        return None
    normal = NormalDist()
    z = normal.inv_cdf(1.0 - (1.0 - level) / 2.0) + normal.inv_cdf(power)
    return math.ceil((z * spread / abs(mean)) ** 2)
