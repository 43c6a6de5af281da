"""The suite's aggregate statistics (Agarwal et al. 2021, "Deep reinforcement learning at the edge
of the statistical precipice"), in numpy: the interquartile mean, its stratified bootstrap interval
and the probability of improvement, over scores grouped in strata (a task at one rung, its seeds).

* :func:`iqm`: the mean of the middle half of the scores, ``⌊n/4⌋`` cut from each end of the sorted
  scores (``scipy.stats.trim_mean(x, 0.25)``, as rliable computes it).
* :func:`stratified_bootstrap`: the IQM of the pooled scores with a percentile interval from
  ``reps`` resamples, each drawing every stratum's scores with replacement within that stratum.
* :func:`probability_of_improvement`: per stratum the probability that a run of ``x`` scores above a
  run of ``y`` (every pair of their runs counted, ties ½: the Mann-Whitney U over ``m·n``), averaged
  over the strata both have scores in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOOTSTRAP_REPS = 2000  # resamples of the stratified bootstrap
CONFIDENCE = 0.95


def iqm(scores: Sequence[float]) -> float:
    """The interquartile mean: the mean of the sorted scores without the ``⌊n/4⌋`` lowest and the
    ``⌊n/4⌋`` highest; ``ValueError`` for no scores or a non-finite one."""
    x = np.sort(np.asarray(scores, dtype=float))  # (n,)
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"IQM of {x.tolist()}; expected at least one score, all finite")
    cut = x.size // 4
    return float(x[cut : x.size - cut].mean())


def stratified_bootstrap(
    strata: Sequence[Sequence[float]],
    *,
    reps: int = BOOTSTRAP_REPS,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(IQM, low, high)``: the IQM of every stratum's scores pooled, and the percentile interval
    at ``confidence`` of the IQM over ``reps`` resamples that draw each stratum's scores with
    replacement within that stratum (its size kept); ``seed`` fixes the draws."""
    groups = [np.asarray(stratum, dtype=float) for stratum in strata]  # each (n_s,)
    if not groups or any(group.size == 0 for group in groups) or reps < 1:
        raise ValueError(
            f"stratified bootstrap over {[g.size for g in groups]} scores per stratum with {reps} "
            "resamples; expected at least one stratum, each with scores, and reps >= 1"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence!r}; expected a number in (0, 1)")
    rng = np.random.default_rng(seed)
    draws = np.empty(reps)  # (reps,)
    for rep in range(reps):
        draws[rep] = iqm(np.concatenate([g[rng.integers(0, g.size, g.size)] for g in groups]))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return iqm(np.concatenate(groups)), float(low), float(high)


def probability_of_improvement(x: Sequence[Sequence[float]], y: Sequence[Sequence[float]]) -> float:
    """P(X > Y): per stratum ``k``, the mean over every pair ``(i, j)`` of ``x[k][i] > y[k][j]``
    (1, ties ½, else 0), averaged over the strata; higher scores are better. ``ValueError`` unless
    both give the same number of strata, each with scores."""
    if len(x) != len(y) or not x or any(len(a) == 0 or len(b) == 0 for a, b in zip(x, y)):
        raise ValueError(
            f"probability of improvement over {len(x)} and {len(y)} strata; expected the same "
            "number, at least one, each with scores on both sides"
        )
    per_stratum = []
    for a, b in zip(x, y):
        a, b = (
            np.asarray(a, dtype=float)[:, None],
            np.asarray(b, dtype=float)[None, :],
        )  # (m,1),(1,n)
        per_stratum.append(float(((a > b) + 0.5 * (a == b)).mean()))
    return float(np.mean(per_stratum))
