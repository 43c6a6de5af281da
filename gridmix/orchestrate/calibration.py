"""A/A replicates: how often the whole harness calls a difference where there is none.

An A/A study (:func:`gridmix.study.spec.aa_study`) trains the matched baseline against a copy of
itself that differs only in its initialisation seed. Nothing separates the arms, so the primary
verdict should be significant at the exact test's level (:func:`gridmix.analysis.stats.exact_level`:
2/64 at 6 seeds), no more. :func:`aa_false_positive_rate` runs many such studies, each on comparison
seeds of its own, through the same runner, ledger and report as a real study, and counts. A rate far
above the level means the harness leaks (e.g. arms that see different data); all p-values at 1 means
the arms are not independent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from scipy import stats as scipy_stats

from gridmix.analysis.stats import exact_level
from gridmix.analysis.verdicts import (
    ALPHA,
    VERDICT_BETTER,
    VERDICT_BETTER_NEGLIGIBLE,
    VERDICT_WORSE,
    VERDICT_WORSE_NEGLIGIBLE,
)
from gridmix.report.build import build_report
from gridmix.report.types import Comparison
from gridmix.study.executors import InProcessExecutor
from gridmix.study.harness import Runner
from gridmix.study.ledger import Ledger
from gridmix.study.spec import Study, aa_study


def aa_false_positive_rate(
    study: Study,
    root: str | Path,
    *,
    replicates: int,
    on_replicate: Callable[[int, Comparison], None] | None = None,
) -> dict:
    """Run ``replicates`` A/A versions of ``study`` (ledgers under ``root``) and count significant
    verdicts.

    Replicate k compares seeds ``study.first_seed + k·seeds …``; a ledger already holding replicate
    k resumes. Returns the rate, the exact level, a one-sided binomial p for "the rate exceeds the
    level" and every replicate's primary p-value; ``on_replicate(k, comparison)`` reports progress.
    """
    if replicates < 1:
        raise ValueError(f"replicates={replicates}; expected >= 1")
    base = aa_study(study)
    p_values, significant = [], 0
    for k in range(replicates):
        replicate = dataclasses.replace(base, first_seed=study.first_seed + k * study.budget.seeds)
        with Ledger(Path(root) / f"aa-{k:04d}") as ledger:
            Runner(replicate, ledger, InProcessExecutor()).run()
            comparison = build_report(ledger).comparison
        if comparison is None or comparison.result is None:
            why = comparison.reason if comparison else "no baseline"
            raise RuntimeError(f"A/A replicate {k} was not compared: {why}")
        p_values.append(comparison.result.p_value)
        # the test's false-positive rate: a significant verdict counts whether or not the effect is
        # negligible
        significant += comparison.verdict in (
            VERDICT_BETTER,
            VERDICT_WORSE,
            VERDICT_BETTER_NEGLIGIBLE,
            VERDICT_WORSE_NEGLIGIBLE,
        )
        if on_replicate:
            on_replicate(k, comparison)
    level = exact_level(study.budget.seeds, ALPHA)
    return dict(
        method="A/A replicates through the harness: matched baseline vs a copy initialised from "
        "another seed, same data; primary sign-flip verdict at alpha",
        model=study.matched_baseline,
        track=study.track,
        seeds_per_replicate=study.budget.seeds,
        replicates=replicates,
        significant=significant,
        rate=significant / replicates,
        exact_level=level,
        alpha=ALPHA,
        binomial_p_rate_above_level=float(scipy_stats.binom.sf(significant - 1, replicates, level)),
        p_values=p_values,
    )
