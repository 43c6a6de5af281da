"""The suite's profile (``gridmix suite``): per track and rung each mixer's mean with its interval
across seeds and the sweep's paired verdicts, each mixer's reach per track, one aggregate across
tracks and rungs, and the cost; built from the studies' reports alone.

:func:`build_suite_report` takes, per track, the study report at every rung
(:class:`TrackRuns`, from the track's sweep or its one study) with the mixer each model is built
around and its parameters, and computes:

* per rung and mixer: the mean of the test metric over the comparison seeds that finished, its 95%
  Student-t interval (none with one seed), the arm's flag (at chance, at ceiling); its paired
  comparison with attention on the seeds both finished, Holm-adjusted across the rung's arms
  (:func:`versus_attention`); the idea's paired comparison with every other arm as the study
  computed it (Δ, p, MDE, verdict);
* normalised scores ``(score − chance) / (ceiling − chance)`` (0 at chance, 1 at ceiling, higher
  better whatever the metric's direction), where the track declares both;
* each mixer's **reach** per track: the highest rung up to which its mean normalised score stays
  above ``fraction`` at every rung (``None``: not above it at the first), with how many of its seeds
  are above it there;
* the **aggregate** per mixer (:mod:`gridmix.report.suite_stats`): the IQM of every normalised
  score (every track × rung × seed), its stratified bootstrap interval (seeds resampled within each
  track × rung) and its probability of improvement over the matched baseline (attention) in the
  strata both have scores in;
* the **cost**: parameters per track and the measured wall-clock seconds of its training runs.

:func:`write_suite_report` writes ``suite.json``, ``suite.md`` and one ``suite_TRACK.png`` per track
(:mod:`gridmix.report.suite_plots` draws what this module computed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

from gridmix.analysis.verdicts import MIN_PAIRS, judge_family
from gridmix.report.format import fmt, markdown_table
from gridmix.report.suite_stats import (
    BOOTSTRAP_REPS,
    CONFIDENCE,
    probability_of_improvement,
    stratified_bootstrap,
)
from gridmix.report.types import Report
from gridmix.report.writing import write_with_plots

DEFAULT_FRACTION = 0.5  # reach: the share of the way from chance to ceiling a mean must stay above


@dataclass(frozen=True)
class TrackRuns:
    """What the suite ran on one track: its rungs in order (the rung's name and the study report
    there; a track without a ladder has one, named ``default``), the mixer each model is built
    around (model name → mixer name), each model's parameters and the FLOPs of one of its training
    steps (forward and backward of a batch of ``batch`` samples) on the lowest rung's grid."""

    track: str
    rungs: tuple[tuple[str, Report], ...]
    mixers: Mapping[str, str]
    params: Mapping[str, int]
    flops: Mapping[str, int]
    batch: int

    def __post_init__(self) -> None:
        if not self.rungs:
            raise ValueError(f"track {self.track!r} with no rungs; expected at least one")
        if len(set(self.mixers.values())) != len(self.mixers):
            raise ValueError(
                f"track {self.track!r}: mixer names {dict(self.mixers)}; expected one per model"
            )
        models = {name for _, report in self.rungs for name in report.arms}
        if missing := sorted(models - set(self.mixers)):
            raise ValueError(f"track {self.track!r}: models {missing} name no mixer; expected all")


def normalise(score: float, chance: float | None, ceiling: float | None) -> float | None:
    """``(score − chance) / (ceiling − chance)``: 0 at chance, 1 at ceiling, higher better for
    either direction of the metric; ``None`` when the track lacks either bound (or they
    coincide)."""
    if chance is None or ceiling is None or ceiling == chance:
        return None
    return (score - chance) / (ceiling - chance)


def seed_interval(values: list[float]) -> tuple[float, float] | None:
    """The 95% Student-t interval of the mean of ``values`` (``None`` with fewer than two)."""
    if len(values) < 2:
        return None
    mean, sem = float(np.mean(values)), float(np.std(values, ddof=1)) / math.sqrt(len(values))
    half = float(scipy_stats.t.ppf(0.975, len(values) - 1)) * sem
    return mean - half, mean + half


def _comparison(report: Report, model: str) -> dict | None:
    """The idea's paired comparison with ``model`` as the study computed it, or None."""
    comparison = report.comparisons.get(model)
    if comparison is None or model == report.idea:
        return None
    r = comparison.result
    if r is None:
        return dict(verdict=comparison.verdict, reason=comparison.reason)
    return dict(verdict=comparison.verdict, delta=r.delta_mean, p=r.p_value, mde=r.mde)


def _finished(arm) -> dict[int, float]:
    """The arm's test metric by comparison-seed index, for the seeds whose run finished "ok"."""
    values = iter(arm.per_seed)
    return {
        i: float(next(values)) for i, status in enumerate(arm.per_seed_status) if status == "ok"
    }


def versus_attention(report: Report) -> dict[str, dict]:
    """Every other arm's paired comparison with the matched baseline (attention) on the seeds both
    finished, Holm-adjusted across the arms of the study and judged as a study judges its own
    (:func:`judge_family`: identical, both arms at chance or ceiling, or seeds too few to reach α
    say so instead of a direction): model → Δ (arm − attention), exact p, Holm's p, MDE, the
    verdict said of the arm."""
    baseline = report.arms.get(report.primary_baseline or "")
    if baseline is None:
        return {}
    reference, pairs, flags = _finished(baseline), {}, {}
    for model, arm in report.arms.items():
        own = _finished(arm)
        seeds = sorted(own.keys() & reference.keys())
        if model != report.primary_baseline and len(seeds) >= MIN_PAIRS:
            pairs[model] = ([own[s] for s in seeds], [reference[s] for s in seeds])
            flags[model] = (arm.flag, baseline.flag)
    results = judge_family(
        pairs,
        direction=report.direction,
        min_effect=None,
        roles=dict.fromkeys(pairs, ""),
        flags=flags,
    )
    return {
        model: dict(
            delta=r.delta_mean,
            p=r.p_value,
            p_holm=r.p_holm,
            mde=r.mde,
            n=r.n_pairs,
            verdict=r.verdict.strip(),
        )
        for model, r in results.items()
    }


def _rung(label: str, report: Report, mixers: Mapping[str, str]) -> dict:
    arms, against_attention = {}, versus_attention(report)
    for model, arm in report.arms.items():
        scores = [float(v) for v in arm.per_seed]
        normalised = [normalise(v, report.chance, report.ceiling) for v in scores]
        arms[mixers[model]] = dict(
            model=model,
            role=arm.role,
            n=len(scores),
            mean=arm.mean,
            interval=seed_interval(scores),
            per_seed=scores,
            normalised=None if None in normalised else normalised,
            flag=arm.flag,
            versus_idea=_comparison(report, model),
            versus_attention=against_attention.get(model),
        )
    return dict(rung=label, grid=report.grid, arms=arms)


def reach(scores: list[tuple[str, list[float] | None]], fraction: float) -> dict:
    """The highest rung up to which the mean normalised score stays above ``fraction`` at every
    rung from the lowest on; ``scores``: per rung in order, its name and the mixer's normalised
    scores there (``None`` or empty: not there, which ends the reach). With the seeds above the
    fraction at that rung; every field ``None`` when it is not above at the lowest."""
    reached = dict(rung=None, seeds_above=None, seeds=None)
    for rung, values in scores:
        if not values or np.mean(values) <= fraction:
            break
        reached = dict(rung=rung, seeds_above=sum(v > fraction for v in values), seeds=len(values))
    return reached


def _track_profile(runs: TrackRuns, fraction: float) -> dict:
    first = runs.rungs[0][1]
    rungs = [_rung(label, report, runs.mixers) for label, report in runs.rungs]
    mixers = list(dict.fromkeys(m for rung in rungs for m in rung["arms"]))
    bounded = first.chance is not None and first.ceiling is not None
    return dict(
        track=runs.track,
        metric=first.metric,
        direction=first.direction,
        chance=first.chance,
        ceiling=first.ceiling,
        idea=runs.mixers[first.idea],
        baseline=runs.mixers.get(first.primary_baseline or "", None),
        rungs=rungs,
        reach={
            m: reach([(r["rung"], r["arms"].get(m, {}).get("normalised")) for r in rungs], fraction)
            for m in mixers
        }
        if bounded
        else {},
        failures=[
            dict(rung=label, **failure.to_dict())
            for label, report in runs.rungs
            for failure in report.failures
            if failure.status == "failed"
        ],
        params={runs.mixers[m]: p for m, p in runs.params.items() if m in runs.mixers},
        flops={runs.mixers[m]: f for m, f in runs.flops.items() if m in runs.mixers},
        flops_batch=runs.batch,
        seconds={
            runs.mixers[model]: float(
                sum(
                    report.timings.get("per_model", {}).get(model, {}).get("total_s", 0.0)
                    for _, report in runs.rungs
                )
            )
            for model in dict.fromkeys(m for _, r in runs.rungs for m in r.arms)
        },
    )


def _aggregate(tracks: list[dict], *, reps: int, seed: int) -> dict:
    """Per mixer: IQM of the normalised scores with its stratified bootstrap interval, and its
    probability of improvement over each stratum's matched baseline."""
    strata: dict[str, list[list[float]]] = {}
    pairs: dict[str, tuple[list, list]] = {}
    flagged: dict[str, int] = {}  # strata where the arm is flagged (at chance, at ceiling)
    for track in tracks:
        for rung in track["rungs"]:
            base = rung["arms"].get(track["baseline"] or "", {}).get("normalised")
            for mixer, arm in rung["arms"].items():
                if not arm["normalised"]:
                    continue
                strata.setdefault(mixer, []).append(arm["normalised"])
                if arm["flag"]:
                    flagged[mixer] = flagged.get(mixer, 0) + 1
                if base and mixer != track["baseline"]:
                    mine, theirs = pairs.setdefault(mixer, ([], []))
                    mine.append(arm["normalised"])
                    theirs.append(base)
    aggregate = {}
    for mixer, groups in strata.items():
        value, low, high = stratified_bootstrap(groups, reps=reps, seed=seed)
        mine, theirs = pairs.get(mixer, ([], []))
        aggregate[mixer] = dict(
            iqm=value,
            interval=[low, high],
            strata=len(groups),
            scores=sum(len(g) for g in groups),
            flagged_strata=flagged.get(mixer, 0),
            p_improvement=probability_of_improvement(mine, theirs) if mine else None,
            p_improvement_strata=len(mine),
        )
    return aggregate


@dataclass(frozen=True)
class SuiteReport:
    """The suite's profile: the idea's mixer name, the budget, the reach fraction, every track's
    profile (rungs, reach, cost; :func:`build_suite_report`), the aggregate per mixer, and the
    tracks of the default set left out because a mixer named cannot serve them (track: why)."""

    idea: str
    budget: str
    fraction: float
    tracks: tuple[dict, ...]
    aggregate: Mapping[str, dict]
    bootstrap_reps: int
    left_out: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.fraction < 1:
            raise ValueError(f"reach fraction {self.fraction!r}; expected a number in (0, 1)")
        if not self.tracks:
            raise ValueError("suite with no tracks; expected at least one")
        both = set(self.left_out) & {track["track"] for track in self.tracks}
        if both:
            raise ValueError(f"tracks {sorted(both)} both profiled and left out; expected either")

    def to_dict(self) -> dict:
        return dict(
            kind="gridmix-suite",
            idea=self.idea,
            budget=self.budget,
            reach_fraction=self.fraction,
            method=dict(
                normalised="(score - chance) / (ceiling - chance)",
                aggregate="interquartile mean of every normalised track x rung x seed score",
                interval=(
                    f"{CONFIDENCE:.0%} percentile interval, stratified bootstrap "
                    f"({self.bootstrap_reps} resamples, seeds resampled within each track x rung)"
                ),
                p_improvement=(
                    "per track x rung, P(X > Y) over every pair of X's and the matched baseline's "
                    "seeds (ties 1/2), averaged over the track x rungs both have (Agarwal et al. "
                    "2021)"
                ),
            ),
            tracks=list(self.tracks),
            aggregate=dict(self.aggregate),
            **({"left_out": dict(self.left_out)} if self.left_out else {}),
        )


def build_suite_report(
    runs: list[TrackRuns],
    *,
    budget: str,
    fraction: float = DEFAULT_FRACTION,
    reps: int = BOOTSTRAP_REPS,
    seed: int = 0,
    left_out: Mapping[str, str] = {},
) -> SuiteReport:
    """The profile of ``runs`` (one :class:`TrackRuns` per track, in order), reach at
    ``fraction``, the bootstrap with ``reps`` resamples drawn from ``seed``; ``left_out``: the
    default set's tracks no run was planned for, each with why."""
    tracks = [_track_profile(track, fraction) for track in runs]
    ideas = {track["idea"] for track in tracks}
    return SuiteReport(
        idea=" / ".join(sorted(ideas)),
        budget=budget,
        fraction=fraction,
        tracks=tuple(tracks),
        aggregate=_aggregate(tracks, reps=reps, seed=seed),
        bootstrap_reps=reps,
        left_out=dict(left_out),
    )


def _interval(interval) -> str:
    return "–" if interval is None else f"[{fmt(interval[0])}, {fmt(interval[1])}]"


def _versus(versus: dict | None) -> str:
    if versus is None:
        return "–"
    if "p" not in versus:
        return f"{versus['verdict']} ({versus['reason']})"
    mde = "unreachable" if versus["mde"] is None else fmt(versus["mde"])
    return f"Δ {fmt(versus['delta'])}, p {fmt(versus['p'])}, MDE {mde}: {versus['verdict']}"


def _against_attention(versus: dict | None) -> str:
    if versus is None:
        return "–"
    mde = "unreachable" if versus["mde"] is None else fmt(versus["mde"])
    return (
        f"Δ {fmt(versus['delta'])}, p {fmt(versus['p'])} (Holm {fmt(versus['p_holm'])}), "
        f"MDE {mde}: {versus['verdict']}"
    )


def _reach_rows(track: dict) -> list[list[str]]:
    """The reach table's rows of ``track``: one per mixer, or one saying it has no reach."""
    if not track["reach"]:
        return [[track["track"], "–", "no chance or ceiling declared", "–"]]
    return [
        [
            track["track"],
            mixer,
            reach["rung"] or "below at the first rung",
            "–" if reach["rung"] is None else f"{reach['seeds_above']}/{reach['seeds']}",
        ]
        for mixer, reach in track["reach"].items()
    ]


def render_suite_markdown(report: SuiteReport, *, figures: Mapping[str, str] = {}) -> str:
    """``suite.md``: per track its rung × mixer table, plot and reach; the aggregate; the cost; the
    method."""
    lines = [
        f"# gridmix suite: {report.idea} against attention and its peers",
        "",
        f"Budget `{report.budget}`; tracks: {', '.join(t['track'] for t in report.tracks)}. "
        "Scores are each study's test metric over its comparison seeds. Against attention: each "
        "arm's exact paired sign-flip test with attention on the seeds both finished, "
        "Holm-adjusted across the rung's arms. Idea against it: the study's own test of the idea "
        "against that arm, as its report gives it.",
        "",
    ]
    if report.left_out:
        said = "; ".join(f"{track} ({why})" for track, why in report.left_out.items())
        lines += [f"Left out of the default tracks, a mixer named cannot serve them: {said}.", ""]
    for track in report.tracks:
        mixers = list(dict.fromkeys(m for rung in track["rungs"] for m in rung["arms"]))
        lines += [
            f"## {track['track']}: {track['metric']} ({track['direction']} is better; chance "
            f"{fmt(track['chance'])}, ceiling {fmt(track['ceiling'])})",
            "",
        ]
        lines += markdown_table(
            [
                "rung",
                "grid",
                "mixer",
                "mean [95% t-interval] (n)",
                "flag",
                "against attention (Holm across the rung's arms)",
                "idea against it",
            ],
            [
                [
                    rung["rung"],
                    rung["grid"],
                    mixer,
                    f"{fmt(arm['mean'])} {_interval(arm['interval'])} ({arm['n']})",
                    arm["flag"] or "",
                    _against_attention(arm["versus_attention"]),
                    _versus(arm["versus_idea"]),
                ]
                for rung in track["rungs"]
                for mixer in mixers
                if (arm := rung["arms"].get(mixer)) is not None
            ],
        )
        if track["track"] in figures:
            lines += ["", f"![{track['track']}]({figures[track['track']]})"]
        lines.append("")
    failures = [(t["track"], f) for t in report.tracks for f in t["failures"]]
    if failures:
        lines += ["## Failed runs", ""] + markdown_table(
            ["track", "rung", "model", "lr", "seed", "error"],
            [
                [track, f["rung"], f["model"], fmt(f["lr"]), str(f["seed"]), f["error"]]
                for track, f in failures
            ],
        )
        lines.append("")
    lines += [
        f"## Reach (highest rung up to which the mean stays above {fmt(report.fraction)} of the "
        "way from chance to ceiling)",
        "",
    ]
    lines += markdown_table(
        ["track", "mixer", "reach", "seeds above there"],
        [row for track in report.tracks for row in _reach_rows(track)],
    )
    lines += ["", "## Aggregate (normalised scores: 0 at chance, 1 at ceiling)", ""]
    lines += markdown_table(
        [
            "mixer",
            "IQM",
            "95% stratified bootstrap interval",
            "scores (track × rungs)",
            "flagged (at chance or ceiling)",
            "P(improvement over attention)",
        ],
        [
            [
                mixer,
                fmt(row["iqm"]),
                _interval(row["interval"]),
                f"{row['scores']} ({row['strata']})",
                f"{row['flagged_strata']} of {row['strata']}",
                "–"
                if row["p_improvement"] is None
                else f"{fmt(row['p_improvement'])} ({row['p_improvement_strata']} track × rungs)",
            ]
            for mixer, row in report.aggregate.items()
        ],
    )
    lines += [
        "",
        "## Cost (parameters; FLOPs of one training step, counted; measured wall-clock seconds of "
        "the training runs in the ledgers)",
        "",
    ]
    lines += markdown_table(
        ["track", "mixer", "parameters", "GFLOP per training step (batch)", "training s"],
        [
            [
                track["track"],
                mixer,
                "–" if track["params"].get(mixer) is None else f"{track['params'][mixer]:,}",
                "–"
                if track["flops"].get(mixer) is None
                else f"{fmt(track['flops'][mixer] / 1e9)} ({track['flops_batch']})",
                f"{seconds:.1f}",
            ]
            for track in report.tracks
            for mixer, seconds in track["seconds"].items()
        ],
    )
    method = report.to_dict()["method"]
    lines += [
        "",
        "## Method",
        "",
        f"Normalised score: {method['normalised']}, so 0 is chance and 1 the ceiling whichever way "
        f"the metric points. Aggregate: the {method['aggregate']}; interval: {method['interval']}; "
        f"probability of improvement: {method['p_improvement']}. A track without a declared chance "
        "and ceiling enters no aggregate and has no reach. FLOPs: torch's FLOP counter (gridmix's "
        "rules for the kernels it misses) over one forward and backward of the track's loss on a "
        "training batch, on the lowest rung's grid. Training seconds include the "
        "learning-rate sweep's runs and were measured when each run trained (a reused run keeps "
        "its own). docs/suite.md says more.",
        "",
    ]
    return "\n".join(lines)


def write_suite_report(report: SuiteReport, out: str | Path) -> list[Path]:
    """Write ``suite.json``, ``suite.md`` and one ``suite_TRACK.png`` per track into ``out``; return
    the paths."""
    from gridmix.report.suite_plots import plot_suite_track  # matplotlib only where drawn

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return write_with_plots(
        (out / "suite.json", out / "suite.md"),
        report.to_dict(),
        lambda drawn: render_suite_markdown(
            report, figures={track: path.name for track, path in drawn.items()}
        ),
        [
            (track["track"], lambda t=track: plot_suite_track(t, out / f"suite_{t['track']}.png"))
            for track in report.tracks
        ],
    )
