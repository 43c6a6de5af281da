"""Paired-seed statistics for comparing an idea against a baseline: numbers only.

A benchmark trains the idea and the baseline on the same seeds, so the unit of analysis is the
per-seed difference ``d_s = idea_s - baseline_s``. This module turns those differences into a
p-value, confidence intervals and a minimum detectable effect, with numpy and scipy only;
:mod:`gridmix.analysis.verdicts` turns them into words (every rule of a verdict lives there):

* Significance: the two-sided sign-flip (paired randomization) test, P. Good,
  *Permutation, Parametric and Bootstrap Tests of Hypotheses*, 3rd ed.,
  Springer 2005. Under H0 each ``d_s`` is symmetric about zero, so its sign is
  arbitrary; ``|mean(d)|`` is compared with its value under all ``2^n`` sign
  patterns (exact) or under random ones (Monte Carlo, with the ``(k+1)/(R+1)``
  correction of Phipson & Smyth 2010, so p is never 0).
* Several comparisons at once: Holm's step-down adjustment, S. Holm, "A simple
  sequentially rejective multiple test procedure", Scand. J. Statist. 6, 1979.
* Effect size: the interval obtained by inverting the sign-flip test (every shift ``δ`` at which the
  test of ``d - δ`` does not reject at ``alpha``; Hartigan 1969, "Using subsample values as typical
  values", JASA 64), which excludes 0 exactly when ``p < alpha``; beside it the Student t-interval
  ``mean(d) +- t_{1-a/2,n-1} s_d/sqrt(n)``, which need not agree with the test.
* Sensitivity: the minimum detectable effect (MDE) of the sign-flip test itself
  (the test the verdict uses), at the given power, for normal paired differences
  with the observed spread ``s_d``: a seeded simulation with common random numbers
  and bisection on the true mean difference. It is ``None`` ("unreachable") when
  no data of n pairs can reach ``p < alpha`` (the exact test's smallest p is
  ``2/2^n``). At n = 6 it is about 1.8·s_d, against 1.43·s_d for a t-test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import stats

# A sign pattern ties with the observed one when its |sum| is within this
# fraction of sum(|d|): any signed sum of n values is off by at most about
# n * 2.2e-16 * sum(|d|) through rounding, far below it for any realistic n.
_TIE_RTOL = 1e-12
# Monte Carlo sign patterns are drawn in batches of this many rows to bound memory.
_MC_BATCH = 10_000
EXACT_MAX_N = 20  # up to this many pairs the sign-flip test enumerates every sign pattern
N_RESAMPLES = 100_000  # beyond it, this many random sign patterns


@dataclass(frozen=True)
class Summary:
    """Mean and spread of one arm's per-seed metric.

    ``std`` is the population standard deviation (ddof=0): that is what the seed
    reference report (``tests/data/reference_report.json``) stores, and it reproduces it.
    """

    mean: float
    std: float
    per_seed: list[float]
    n: int


@dataclass(frozen=True)
class SignFlipResult:
    """Two-sided sign-flip p-value and how it was obtained."""

    p_value: float
    method: str  # "exact" or "monte-carlo"
    n_patterns: int  # 2**n sign patterns (exact) or resamples drawn (monte-carlo)


@dataclass(frozen=True)
class TInterval:
    """Student t confidence interval for the mean paired difference."""

    mean: float
    low: float
    high: float
    half_width: float
    confidence: float


@dataclass(frozen=True)
class SignFlipInterval:
    """The confidence interval of the mean difference by inverting the sign-flip test: ``[low,
    high]`` holds every shift the test does not reject at ``1 - confidence``; ``None`` ends when
    every shift is kept (too few pairs for the test to reject anything)."""

    low: float | None
    high: float | None
    confidence: float
    # "exact" (the endpoints are subset means of the differences) or "monte-carlo" (bisection)
    method: str

    def excludes(self, value: float) -> bool:
        return (self.low is not None and value < self.low) or (
            self.high is not None and value > self.high
        )


def summarize(values: Sequence[float]) -> Summary:
    """Return mean, population std (ddof=0), the values and their count."""
    arr = _finite_vector(values, "values")
    if arr.size == 0:
        raise ValueError("values is empty; expected at least 1 value")
    return Summary(
        mean=float(arr.mean()), std=float(arr.std()), per_seed=arr.tolist(), n=int(arr.size)
    )


def paired_differences(idea: Sequence[float], baseline: Sequence[float]) -> np.ndarray:
    """Return ``idea_s - baseline_s`` per seed as float64."""
    idea_arr = _finite_vector(idea, "idea")
    baseline_arr = _finite_vector(baseline, "baseline")
    if idea_arr.size != baseline_arr.size:
        raise ValueError(
            f"idea has {idea_arr.size} values but baseline has {baseline_arr.size}; "
            "expected one value per seed in each, in the same seed order"
        )
    return _check_diffs(idea_arr - baseline_arr)


def sign_flip_test(
    diffs: Sequence[float],
    *,
    exact_max_n: int = EXACT_MAX_N,
    n_resamples: int = N_RESAMPLES,
    rng_seed: int = 0,
) -> SignFlipResult:
    """Two-sided sign-flip test of ``mean(diffs) == 0`` with statistic ``|mean(d)|``.

    Up to ``exact_max_n`` pairs every one of the ``2^n`` sign patterns is enumerated and p is the
    fraction whose ``|mean|`` reaches the observed one (the observed pattern included). Beyond that,
    ``n_resamples`` random patterns drawn from ``rng_seed`` give ``p = (k + 1) / (n_resamples +
    1)``.
    """
    d = _check_diffs(diffs)
    if n_resamples < 1:
        raise ValueError(f"n_resamples is {n_resamples!r}; expected a positive integer")
    # |mean| and |sum| order the patterns identically; sums avoid a division.
    threshold = abs(d.sum()) - _TIE_RTOL * np.abs(d).sum()
    if d.size <= exact_max_n:
        sums = np.zeros(1)
        for value in d:  # doubling: after k steps, the sums of all 2^k sign patterns so far
            sums = np.concatenate([sums + value, sums - value])
        n_extreme = int(np.count_nonzero(np.abs(sums) >= threshold))
        return SignFlipResult(
            p_value=n_extreme / sums.size, method="exact", n_patterns=int(sums.size)
        )
    rng = np.random.default_rng(rng_seed)
    n_extreme = 0
    for start in range(0, n_resamples, _MC_BATCH):
        rows = min(_MC_BATCH, n_resamples - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(rows, d.size))
        n_extreme += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return SignFlipResult(
        p_value=(n_extreme + 1) / (n_resamples + 1), method="monte-carlo", n_patterns=n_resamples
    )


def t_interval(diffs: Sequence[float], *, confidence: float = 0.95) -> TInterval:
    """Student t interval ``mean(d) +- t_{(1+confidence)/2, n-1} * s_d / sqrt(n)``, s_d with
    ddof=1."""
    check_unit_interval(confidence, "confidence")
    d = _check_diffs(diffs)
    mean = float(d.mean())
    t_crit = stats.t.ppf(0.5 + confidence / 2, d.size - 1)
    half_width = float(t_crit * _standard_error(d))
    return TInterval(
        mean=mean,
        low=mean - half_width,
        high=mean + half_width,
        half_width=half_width,
        confidence=confidence,
    )


def sign_flip_interval(
    diffs: Sequence[float],
    *,
    alpha: float = 0.05,
    exact_max_n: int = EXACT_MAX_N,
    n_resamples: int = N_RESAMPLES,
    rng_seed: int = 0,
) -> SignFlipInterval:
    """The shifts ``δ`` at which :func:`sign_flip_test` of ``diffs - δ`` gives ``p >= alpha``: an
    interval.

    For a fixed set of sign patterns (all of them, or the seeded random ones) each pattern's ``|Σ
    s(d - δ)|`` reaches ``|Σ (d - δ)|`` on a set of shifts that shrinks as ``δ`` moves away from
    ``mean(d)`` (where p = 1), so p falls monotonically on either side and the kept shifts form one
    closed interval. Exact: p changes only at subset means of ``d``, so each end is the last subset
    mean kept, found by binary search. Monte Carlo: bisection between ``mean(d)`` and the extreme
    difference (beyond it every difference has one sign and p is at its floor). Either way the
    interval excludes 0 exactly when the test at 0 rejects (an end within round-off of 0 is put at 0
    when the test at 0 does not reject). Unbounded (``None`` ends) when the test can never reject.
    """
    check_unit_interval(alpha, "alpha")
    d = _check_diffs(diffs)
    options = dict(exact_max_n=exact_max_n, n_resamples=n_resamples, rng_seed=rng_seed)
    exact = d.size <= exact_max_n
    method = "exact" if exact else "monte-carlo"
    if min_attainable_p(d.size, exact_max_n=exact_max_n, n_resamples=n_resamples) >= alpha:
        return SignFlipInterval(low=None, high=None, confidence=1 - alpha, method=method)

    def kept(delta: float) -> bool:
        return sign_flip_test(d - delta, **options).p_value >= alpha

    center = float(d.mean())
    if exact:
        sums, counts = np.zeros(1), np.zeros(1)
        for value in d:  # doubling: the sums and sizes of every subset so far
            sums, counts = (
                np.concatenate([sums, sums + value]),
                np.concatenate([counts, counts + 1]),
            )
        means = np.unique(sums[1:] / counts[1:])  # ascending: every subset mean, where p can change
        low = _last_kept(means[means <= center][::-1], kept)
        high = _last_kept(means[means >= center], kept)
    else:
        low = _bisect_kept(center, float(d.min()), kept)
        high = _bisect_kept(center, float(d.max()), kept)
    # round-off at an end: the interval follows the test at 0
    if kept(0.0) and not low <= 0.0 <= high:
        low, high = min(low, 0.0), max(high, 0.0)
    return SignFlipInterval(low=float(low), high=float(high), confidence=1 - alpha, method=method)


def _last_kept(candidates: np.ndarray, kept) -> float:
    """The last of ``candidates`` (ordered away from the mean, the first kept) at which ``kept``
    holds."""
    first, last = (
        0,
        candidates.size - 1,
    )  # kept(candidates[first]) holds; find the last index that does
    while first < last:
        middle = (first + last + 1) // 2
        first, last = (middle, last) if kept(float(candidates[middle])) else (first, middle - 1)
    return float(candidates[first])


def _bisect_kept(center: float, extreme: float, kept, *, steps: int = 80) -> float:
    """The farthest shift from ``center`` towards ``extreme`` that ``kept`` holds for, to
    round-off."""
    inside, outside = center, extreme
    if kept(outside):
        return outside
    for _ in range(steps):
        middle = 0.5 * (inside + outside)
        if middle in (inside, outside):
            break
        inside, outside = (middle, outside) if kept(middle) else (inside, middle)
    return inside


def sign_flip_mde(
    diffs: Sequence[float],
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    n_sim: int = 2000,
    rng_seed: int = 0,
) -> float | None:
    """Smallest true mean difference the two-sided sign-flip test at ``alpha`` detects with
    ``power``.

    Estimated from the observed spread: ``n_sim`` samples of n normal differences with standard
    deviation ``s_d`` (ddof=1), drawn once from ``rng_seed`` and shifted by each candidate effect
    (common random numbers, so power rises with the effect), each tested as :func:`sign_flip_test`
    would (every sign pattern up to n = 12, else 4,096 random patterns drawn from the same seed);
    bisection to 0.1% of ``s_d``. ``None`` when n pairs can never give ``p < alpha`` (``2/2^n >=
    alpha``).
    """
    check_unit_interval(alpha, "alpha")
    check_unit_interval(power, "power")
    d = _check_diffs(diffs)
    n, spread = d.size, float(d.std(ddof=1))
    if math.ldexp(1.0, 1 - n) >= alpha:  # the floor 2/2^n, exact and without overflow at any n
        return None
    if spread == 0.0:
        return 0.0
    rng = np.random.default_rng(rng_seed)
    noise = rng.standard_normal((n_sim, n)) * spread  # (R, n)
    if n <= 12:
        # (2^n, n): every sign pattern
        patterns = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    else:
        patterns = 1.0 - 2.0 * rng.integers(0, 2, size=(4096, n))  # (4096, n)

    def power_at(effect: float) -> float:
        sample = noise + effect  # (R, n)
        threshold = np.abs(sample.sum(axis=1)) - _TIE_RTOL * np.abs(sample).sum(axis=1)  # (R,)
        p = (np.abs(sample @ patterns.T) >= threshold[:, None]).mean(axis=1)  # (R,)
        return float(np.mean(p < alpha))

    low, high = 0.0, spread
    while power_at(high) < power:
        low, high = high, 2.0 * high
        if high > 1e6 * spread:
            return None
    while high - low > 1e-3 * spread:
        middle = 0.5 * (low + high)
        low, high = (low, middle) if power_at(middle) >= power else (middle, high)
    return high


def min_attainable_p(
    n_pairs: int, *, exact_max_n: int = EXACT_MAX_N, n_resamples: int = N_RESAMPLES
) -> float:
    """The smallest p :func:`sign_flip_test` can return for ``n_pairs`` pairs, whatever the data.

    Exact (n ≤ ``exact_max_n``): ``2/2^n`` (the observed pattern and its mirror are always as
    extreme). Monte Carlo: ``1/(n_resamples + 1)``, or the exact floor where that is larger.
    ``2/2^n`` is ``ldexp(1, 1 - n)``: exact, and 0.0 rather than an overflow where it is below the
    smallest float (n > 1075).
    """
    if n_pairs < 2:
        raise ValueError(f"n_pairs is {n_pairs!r}; expected at least 2")
    exact_floor = math.ldexp(1.0, 1 - n_pairs)
    return exact_floor if n_pairs <= exact_max_n else max(exact_floor, 1.0 / (n_resamples + 1))


def exact_level(n_pairs: int, alpha: float = 0.05) -> float:
    """The exact sign-flip test's false-positive rate at ``p < alpha`` for n continuous pairs under
    H0.

    All ``2^n`` sign patterns are equally likely and p takes the values ``2k/2^n``, so the rate is
    the largest such value below ``alpha``: 2/64 at n = 6, 6/128 at n = 7, 12/256 at n = 8. Computed
    in exact integers (``alpha`` as the fraction its float is), so no n overflows.
    """
    check_unit_interval(alpha, "alpha")
    if n_pairs < 2:
        raise ValueError(f"n_pairs is {n_pairs!r}; expected at least 2")
    patterns = 2**n_pairs
    # the largest even count with k / 2^n < alpha
    k = 2 * math.ceil(Fraction(alpha) * patterns / 2) - 2
    return k / patterns


def seeds_needed(alpha: float = 0.05, *, comparisons: int = 1) -> int:
    """Fewest pairs with which ``comparisons`` Holm-adjusted sign-flip tests can all reach ``p <
    alpha``.

    Holm multiplies the smallest p by the number of comparisons, so the floor ``2/2^n`` must be
    below ``alpha / comparisons``: 6 pairs for one comparison at 0.05, 7 for two or three, 8 for
    four to six.
    """
    check_unit_interval(alpha, "alpha")
    if comparisons < 1:
        raise ValueError(f"comparisons is {comparisons!r}; expected at least 1")
    n = 2
    while comparisons * min_attainable_p(n) >= alpha:
        n += 1
    return n


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values, in the order given, capped at 1.

    The i-th smallest of m p-values is multiplied by ``m - i + 1`` (i from 1) and
    a running maximum keeps the adjusted values in the order of the raw ones.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p_values has shape {p.shape}; expected a non-empty 1-D sequence")
    outside = np.flatnonzero(~((p >= 0) & (p <= 1)))
    if outside.size:
        i = outside[0]
        raise ValueError(f"p_values[{i}] is {float(p[i])!r}; expected a probability in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def _finite_vector(values: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} has shape {arr.shape}; expected a 1-D sequence of per-seed values"
        )
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(f"{name}[{bad[0]}] is {float(arr[bad[0]])!r}; expected a finite number")
    return arr


def _check_diffs(diffs: Sequence[float]) -> np.ndarray:
    d = _finite_vector(diffs, "diffs")
    if d.size < 2:
        raise ValueError(f"got {d.size} paired difference(s); expected at least 2")
    return d


def check_unit_interval(value: float, name: str) -> None:
    """``ValueError`` in one line unless ``0 < value < 1`` (a level, a confidence, a power)."""
    if not 0 < value < 1:
        raise ValueError(f"{name} is {value!r}; expected a number strictly between 0 and 1")


def _standard_error(d: np.ndarray) -> float:
    return float(d.std(ddof=1) / np.sqrt(d.size))
