"""Check a report's MDE against an independent power simulation of the sign-flip test.

    python benchmarks/check_mde.py runs/image-32x32-default/bench_report.json [--draws 4000]

For the primary comparison: draws n normal differences with the observed spread (ddof=1) shifted by
an effect, tests each sample by enumerating every sign pattern one at a time (no shared code with
``gridmix.analysis.stats``), and finds the effect with 80% power by a grid search; prints it beside
the report's ``mde`` and their ratio, and the simulated power at the report's MDE. Exit status 1 if
they differ by more than 10%.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

from gridmix.report.types import Report


def sign_flip_p(sample: np.ndarray, patterns: np.ndarray) -> float:
    observed = abs(sample.sum())
    return float(np.mean(np.abs(patterns @ sample) >= observed * (1 - 1e-12)))


def power(effect: float, spread: float, n: int, *, draws: int, alpha: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    patterns = np.array(list(itertools.product((1.0, -1.0), repeat=n)))  # (2^n, n)
    hits = sum(sign_flip_p(rng.normal(effect, spread, n), patterns) < alpha for _ in range(draws))
    return hits / draws


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args(argv)
    comparison = Report.from_dict(json.loads(args.report.read_text())).comparison
    if comparison is None or comparison.result is None:
        why = comparison.reason if comparison else "no baseline"
        print(f"{args.report}: the primary comparison was not compared ({why})")
        return 1
    result = comparison.result
    diffs = np.asarray(result.per_seed_diffs)
    n, spread, alpha, reported = diffs.size, float(diffs.std(ddof=1)), result.alpha, result.mde
    if reported is None:
        print(
            f"report MDE unreachable at n={n}: smallest exact p 2/2^{n} = {2 / 2**n:.4g} vs alpha "
            f"{alpha}"
        )
        return 0 if 2 / 2**n >= alpha else 1
    grid = np.linspace(0.5, 3.5, 61) * spread  # effects from 0.5 to 3.5 spreads, step 0.05
    powers = [power(e, spread, n, draws=args.draws, alpha=alpha, seed=args.seed) for e in grid]
    independent = float(next((e for e, p in zip(grid, powers) if p >= 0.8), float("nan")))
    at_reported = power(reported, spread, n, draws=args.draws, alpha=alpha, seed=args.seed + 1)
    ratio = reported / independent
    print(
        f"n={n}, s_d={spread:.4g}: report MDE {reported:.4g} ({reported / spread:.3f} s_d); "
        f"independent simulation {independent:.4g} ({independent / spread:.3f} s_d, {args.draws} "
        f"draws); ratio {ratio:.3f}; simulated power at the report's MDE {at_reported:.3f}"
    )
    return 0 if abs(ratio - 1) <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
