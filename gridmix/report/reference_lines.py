"""What the report says of the references (:mod:`gridmix.analysis.references`) and of the training
checks.

References: their values on every comparison seed, what each chose on validation, and each model
against the best of them, seed by seed (:func:`reference_lines`); the headline's sentence on how the
idea and the matched baseline fare against that reference (:func:`reference_headline`). Training
checks (:func:`training_lines`, :func:`training_flags`): a chosen learning rate on the edge of a
sweep of three or more rates, final runs that ran into the epoch cap without early stopping, final
runs still improving when the epoch cap ended them, final runs whose best epoch lies in the first 10
% of the cap, final runs that overfit (best validation early, then worse by more than the arm's seed
spread, with or without ``patience``), validation or test splits under 50 items, and seeds on which
an arm predicted one constant.
"""

from __future__ import annotations

import numpy as np

from gridmix.analysis.verdicts import VERDICT_IDENTICAL, VERDICT_UNREACHABLE, negligible, side
from gridmix.report.format import fmt
from gridmix.report.types import Comparison, Report

MIN_EDGE_RATES = 3  # with two rates every choice is an edge: the check needs three
MIN_OVERFIT_EPOCHS = (
    3  # "best early, then worse" needs an epoch after the first half: not checked on shorter runs
)
EARLY_BEST_FRACTION = (
    0.1  # a best epoch within the first 10 % of the cap: the tested model barely trained
)
MIN_EVAL_ITEMS = 50  # a validation or test split smaller than this is warned about
CHOSEN = {  # how each kind of reference chose its parameters
    "forecasting": "Chosen by the track's metric: the season on the training and validation "
    "windows; the ridge penalty, and its inputs (the windows as the models get them, or each "
    "normalised by its own mean and spread as the models' RevIN does), on validation. The "
    "training mean is the chance level where the track declares its training part's mean",
    "classification": "Chosen by the track's metric: the logistic probe's L2 penalty on "
    "validation; 1-NN's inputs (raw as the models see them, or standardised per feature) by its "
    "validation accuracy, which it gives its neighbour's label as probability",
}


def edge_learning_rates(report: Report) -> dict[str, float]:
    """Models whose chosen learning rate is the smallest or largest of a sweep of at least three
    rates."""
    lrs = sorted(report.budget["lrs"])
    if len(lrs) < MIN_EDGE_RATES:
        return {}
    return {name: arm.lr for name, arm in report.arms.items() if arm.lr in (lrs[0], lrs[-1])}


def stopped_at_cap(report: Report) -> dict[str, int]:
    """Per model, with ``patience`` in the budget, how many final runs ran every epoch of the cap
    without early stopping (whatever their best epoch): training ended at the budget, not at a
    plateau."""
    cap = report.budget["epochs"]
    if not report.budget.get("patience"):
        return {}
    counts = {name: sum(1 for c in arm.val if len(c) == cap) for name, arm in report.arms.items()}
    return {name: n for name, n in counts.items() if n}


def improving_at_cap(report: Report) -> dict[str, int]:
    """Per model, how many final runs were still improving at the epoch cap (best validation epoch
    the last)."""
    cap = report.budget["epochs"]
    counts = {}
    for name, arm in report.arms.items():
        curves = [c for c in arm.val if len(c) == cap and cap > 1]
        n = sum(1 for c in curves if c.index(_best(report, c)) == cap - 1)
        if n:
            counts[name] = n
    return counts


def best_early(report: Report) -> dict[str, int]:
    """Per model, how many final runs had their best validation epoch in the first
    EARLY_BEST_FRACTION of the epoch cap (the first epoch of 10 or more): the model that counted
    barely trained."""
    cap = report.budget["epochs"]
    counts = {}
    for name, arm in report.arms.items():
        n = sum(
            1 for c in arm.val if c and c.index(_best(report, c)) + 1 <= EARLY_BEST_FRACTION * cap
        )
        if n:
            counts[name] = n
    return counts


def overfitting(report: Report) -> dict[str, int]:
    """Per model, how many final runs overfit: best validation in the first half of the epochs run,
    then the last epoch worse than that best by more than the arm's seed spread (the standard
    deviation, ddof=1, of its seeds' best validation values), in runs of at least MIN_OVERFIT_EPOCHS
    epochs. With ``patience`` the best epoch's model was restored and tested, but the run still got
    worse after it."""
    counts = {}
    for name, arm in report.arms.items():
        curves = [c for c in arm.val if len(c) >= MIN_OVERFIT_EPOCHS]
        bests = [_best(report, c) for c in curves]
        spread = float(np.std(bests, ddof=1)) if len(bests) > 1 else 0.0
        n = sum(
            1
            for c, best in zip(curves, bests)
            if c.index(best) < len(c) / 2 and abs(c[-1] - best) > spread and c[-1] != best
        )
        if n:
            counts[name] = n
    return counts


def small_splits(report: Report) -> dict[str, int]:
    """The validation and test splits with fewer than MIN_EVAL_ITEMS items (from the data
    fingerprint's split sizes, else the budget's): one sample more or less moves their metric a
    lot."""
    sizes = (report.data or {}).get("sizes") or {
        "val": report.budget.get("n_val"),
        "test": report.budget.get("n_test"),
    }
    return {
        split: sizes[split]
        for split in ("val", "test")
        if sizes.get(split) is not None and sizes[split] < MIN_EVAL_ITEMS
    }


def _best(report: Report, curve) -> float:
    return min(curve) if report.lower_is_better else max(curve)


def training_flags(report: Report, names) -> list[str]:
    """The training checks that fire for the arms ``names``, one short phrase each (for the
    headline)."""
    edges, improving, overfit = (
        edge_learning_rates(report),
        improving_at_cap(report),
        overfitting(report),
    )
    capped, early = stopped_at_cap(report), best_early(report)
    phrases = []
    for name in names:
        arm = report.arms[name]
        if name in edges:
            phrases.append(f"{name} chose the edge rate {edges[name]:g} of the sweep")
        if name in capped:
            phrases.append(
                f"{name} ran into the epoch cap without early stopping on {capped[name]}/{arm.n} "
                "seeds"
            )
        if name in improving:
            phrases.append(
                f"{name} was still improving at the epoch cap on {improving[name]}/{arm.n} seeds"
            )
        if name in early:
            phrases.append(
                f"{name} was best in the first {EARLY_BEST_FRACTION:.0%} of the epochs on "
                f"{early[name]}/{arm.n} seeds"
            )
        if name in overfit:
            phrases.append(f"{name} overfit on {overfit[name]}/{arm.n} seeds")
        if arm.constant_seeds:
            phrases.append(
                f"{name} predicted one constant on {len(arm.constant_seeds)}/{arm.n} seeds"
            )
    small = small_splits(report)
    if small:
        phrases.append(
            " and ".join(f"the {split} split has only {n} items" for split, n in small.items())
        )
    return phrases


def training_lines(report: Report) -> list[str]:
    """The report's Markdown on the training checks."""
    lines = []
    lrs = sorted(report.budget["lrs"])
    cap, patience = report.budget["epochs"], report.budget.get("patience")
    edges = edge_learning_rates(report)
    if edges:
        lines += [
            "**Learning rate at the edge of the sweep** (the best may lie beyond it; widen "
            "`--lrs`): "
            + ", ".join(f"{name} chose {lr:g}" for name, lr in edges.items())
            + f" of {lrs}.",
            "",
        ]
    elif 1 < len(lrs) < MIN_EDGE_RATES:
        lines += [
            f"With {len(lrs)} learning rates {lrs} every choice is at an edge of the sweep, so "
            "whether the best "
            f"lies beyond it is not checked (sweep at least {MIN_EDGE_RATES} with `--lrs`).",
            "",
        ]
    capped = stopped_at_cap(report)
    if capped:
        lines += [
            f"**Stopped by the epoch cap** (ran all {cap} epochs without the {patience} epochs "
            "without improvement that stop early: training ended at the budget, not at a plateau; "
            "more epochs may change the result): " + _counts(report, capped) + ".",
            "",
        ]
    improving = improving_at_cap(report)
    if improving:
        lines += [
            f"**Still improving at the cap of {cap} epochs** (best validation in the "
            "last epoch; more epochs or `patience` in the budget may change the result): "
            + _counts(report, improving)
            + ".",
            "",
        ]
    early = best_early(report)
    if early:
        lines += [
            f"**Best epoch in the first {EARLY_BEST_FRACTION:.0%} of training** (of the cap of "
            f"{cap} epochs; the model that was tested barely trained: a learning rate too high, or "
            "validation noise): " + _counts(report, early) + ".",
            "",
        ]
    overfit = overfitting(report)
    if overfit:
        tested = (
            "`patience` restored the best epoch's model, which was tested, but validation got "
            "worse after it"
            if patience
            else "the last epoch's model was tested; `patience` in the budget keeps the best epoch"
        )
        lines += [
            "**Overfitting** (validation best in the first half of the epochs, then worse by more "
            "than the "
            f"arm's seed spread by the last epoch; {tested}): " + _counts(report, overfit) + ".",
            "",
        ]
    small = small_splits(report)
    if small:
        lines += [
            "**Small evaluation sets**: "
            + " and ".join(f"{split} {n} items" for split, n in small.items())
            + f" (under {MIN_EVAL_ITEMS}): one item more or less moves the metric, so the chosen "
            "learning rate "
            "and early stopping (validation) or the comparison (test) rest on few samples.",
            "",
        ]
    return lines


def _counts(report: Report, counts: dict[str, int]) -> str:
    return ", ".join(f"{name} in {n} of {report.n_seeds} seeds" for name, n in counts.items())


def reference_headline(report: Report) -> str | None:
    """How the idea and the matched baseline fare against the best reference, in one sentence naming
    it, what it chose on validation and every other arm it beats, each with Δ and p; bold unless the
    idea and the matched baseline both beat it. None without references."""
    comparisons = report.reference_comparisons
    if not comparisons:
        return None
    best = next(iter(comparisons.values())).b
    models = [("the idea", report.idea)] + (
        [(f"the matched baseline {report.primary_baseline}", report.primary_baseline)]
        if report.primary_baseline
        else []
    )
    fates = [(label, comparisons[name]) for label, name in models]
    named = {name for _, name in models}
    beaten = [
        f"{report.arms[name].role} {name} ({_delta_p(c)})"
        for name, c in comparisons.items()
        if name not in named and c.a_better is False
    ]
    choice = _headline_choice(((report.references or {}).get("details") or {}).get(best))
    sentence = (
        f"Best reference: {best} ({choice}{report.metric} "
        f"{fmt(report.references['values'][best])}, mean over seeds): "
        + " and ".join(f"{label} {_fate(c)}" for label, c in fates)
        + (f"; it also beats {', '.join(beaten)}" if beaten else "")
    )
    if all(c.a_better for _, c in fates):
        return sentence + " (each a paired sign-flip test alone at α)."
    return f"**{sentence}** (each a paired sign-flip test alone at α)."


def _headline_choice(details: list[dict] | None) -> str:
    """What the best reference chose that changes what it is (its inputs, a penalty at the edge),
    for the headline: "" when nothing."""
    words = []
    inputs = sorted({d["inputs"] for d in details or () if d.get("inputs")})
    if inputs:
        words.append(f"on {' or '.join(inputs)} inputs")
    edges = sorted({d["edge"] for d in details or () if d.get("edge")})
    if edges:
        words.append(f"penalty at the {' or '.join(edges)} end of its grid")
    return "".join(f"{word}; " for word in words)


def _delta_p(comparison: Comparison) -> str:
    """``Δ = …, p = …`` of a compared comparison."""
    return f"Δ = {fmt(comparison.result.delta_mean)}, p = {fmt(comparison.result.p_value)}"


def _fate(comparison: Comparison) -> str:
    """A model's comparison with the reference, as words about the model (with the mean difference
    and p)."""
    if comparison.result is None:
        return f"was not compared with it ({comparison.reason})"
    delta = f" ({_delta_p(comparison)})"
    if comparison.a_better is not None:
        return ("beats it" if comparison.a_better else "loses to it") + delta
    verdict = comparison.verdict
    if verdict == VERDICT_IDENTICAL:
        return "is identical to it on every seed"
    if negligible(verdict):
        return f"differs from it by a negligible amount{delta}"
    if verdict == VERDICT_UNREACHABLE:
        return f"cannot be told from it with these seeds{delta}"
    return f"does not beat it{delta}, no significant difference"


def reference_lines(report: Report) -> list[str]:
    """The references section: their values and choices, then every model against the best of
    them."""
    refs = report.references or {}
    if not refs.get("values"):
        return (
            ["## References", "", f"– (failed: {refs['error']})", ""] if refs.get("error") else []
        )
    ref_extras, model_extras = refs.get("extra_metrics") or {}, refs.get("models") or {}
    extra_names = sorted(
        {
            name
            for table in (ref_extras, model_extras)
            for metrics in table.values()
            for name in metrics
        }
    )
    if not refs.get("per_seed"):
        where = (
            "seed 0's data standing for every seed: stored before references were computed per seed"
        )
    elif refs.get("fixed_split"):
        where = "the fixed split: the same on every seed"
    else:
        where = "every comparison seed's own split"
    lines = [
        f"## References ({where})",
        "",
        "| reference | "
        + " | ".join([f"{report.metric} (mean over seeds)", "per seed", "chosen", *extra_names])
        + " |",
        "|---|---|---|---|" + "---|" * len(extra_names),
    ]
    for name, value in refs["values"].items():
        per_seed = (refs.get("per_seed") or {}).get(name) or []
        shown = (
            "same on every seed"
            if refs.get("fixed_split")
            else ", ".join(fmt(v) for v in per_seed) or "–"
        )
        extras = "".join(f" {fmt(ref_extras.get(name, {}).get(e))} |" for e in extra_names)
        lines.append(
            f"| {name} | {fmt(value)} | {shown} | "
            f"{_chosen((refs.get('details') or {}).get(name))} |" + extras
        )
    lines += [
        "",
        CHOSEN.get(refs.get("kind"), "")
        + " (the Method paragraph says how each reference is fitted).",
    ]
    lines += _edge_lines(refs.get("details") or {})
    lines += _model_table(report, extra_names, model_extras)
    if any(name.startswith("MASE") for name in extra_names):
        lines += [
            "",
            "MASE: the forecasts' mean absolute error over the test windows divided by the "
            "in-sample mean absolute error of the naive forecast m steps back on the training "
            "series (as in the M4 competition); below 1 beats that in-sample naive error.",
        ]
    return lines + [""]


def _model_table(report: Report, extra_names: list[str], model_extras: dict) -> list[str]:
    comparisons = report.reference_comparisons
    if not comparisons:
        return []
    best = next(iter(comparisons.values())).b
    values = report.references["values"]
    persistence = values.get("persistence")
    relative = persistence is not None and persistence > 0
    columns = ["model", "n", "Δ mean", "95% CI (sign-flip)", "wins", "p (sign-flip)", "verdict"]
    columns += [f"{report.metric} / persistence"] if relative else []
    columns += [f"{name} (mean over seeds)" for name in extra_names]
    lines = [
        "",
        f"Each model against the best reference, {best}: model − reference per seed, a paired "
        "sign-flip test alone at α (the best reference is the one with the best mean test metric, "
        "a choice that favours it).",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for name, comp in comparisons.items():
        r, arm = comp.result, report.arms[name]
        if r is None:
            cells = [name, "–", "–", "–", "–", "–", f"{comp.verdict}: {comp.reason}"]
        else:
            cells = [
                name,
                str(r.n_pairs),
                fmt(r.delta_mean),
                interval(r),
                str(r.idea_wins),
                f"{fmt(r.p_value)} ({r.p_method})",
                reference_label(comp),
            ]
        if relative:
            cells.append(fmt(None if arm.mean is None else arm.mean / persistence, 3))
        cells += [fmt(model_extras.get(name, {}).get(e), 3) for e in extra_names]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# a significant verdict's side
WINNERS = dict(better="model beats reference", worse="reference beats model")


def reference_label(comparison: Comparison) -> str:
    """A model's verdict against the reference said of the model and the reference ("model beats
    reference"), not in the arm-against-arm words of the other tables ("control better"); other
    verdicts as they are."""
    verdict = comparison.verdict
    if side(verdict) is None:
        return verdict
    return WINNERS[side(verdict)] + (
        " by a negligible amount" if negligible(verdict) else " (significant)"
    )


def interval(result) -> str:
    """The interval from inverting the sign-flip test, "unbounded" where too few pairs bound it."""
    if result.signflip_ci_low is None or result.signflip_ci_high is None:
        return "unbounded"
    return f"{fmt(result.signflip_ci_low)} … {fmt(result.signflip_ci_high)}"


def intervals(result) -> str:
    """Both 95% intervals of a paired result, the one that agrees with the sign-flip p first."""
    return (
        f"95% sign-flip interval {interval(result)}; t-interval {fmt(result.ci_low)} … "
        f"{fmt(result.ci_high)}"
    )


def _edge_lines(details: dict[str, list[dict]]) -> list[str]:
    """The flag for references whose chosen penalty is the smallest or largest of its grid on some
    seed."""
    found = []
    for name, per_seed in details.items():
        at_edge = [d for d in per_seed if d.get("edge")]
        if at_edge:
            chosen = sorted({d.get("alpha", d.get("l2")) for d in at_edge})
            low, high = at_edge[0]["grid"]
            found.append(
                f"{name} chose {', '.join(fmt(c, 3) for c in chosen)}, the "
                f"{' or '.join(sorted({d['edge'] for d in at_edge}))} of {fmt(low, 3)} … "
                f"{fmt(high, 3)}, on {len(at_edge)}/{len(per_seed)} seeds"
            )
    if not found:
        return []
    return [
        "",
        "**Penalty at the edge of its grid** (the best penalty may lie beyond it, so the "
        "reference may be stronger than shown): " + "; ".join(found) + ".",
    ]


def _chosen(details: list[dict] | None) -> str:
    """What a reference chose per seed (its inputs, a season, a penalty), in a few words; "–" for
    nothing chosen."""
    if not details:
        return "–"
    words = []
    inputs = sorted({d["inputs"] for d in details if d.get("inputs")})
    if inputs:
        words.append(f"{' / '.join(inputs)} inputs" + (" by seed" if len(inputs) > 1 else ""))
    for key, label in (
        ("season", "season"),
        ("alpha", "ridge α × mean eigenvalue"),
        ("l2", "L2"),
        ("validation_accuracy", "neighbour's probability"),
        ("class", "class"),
        ("mean", "mean"),
    ):
        values = sorted({d[key] for d in details if d.get(key) is not None})
        if values:
            words.append(
                f"{label} {fmt(values[0], 3)}"
                if len(values) == 1
                else f"{label} {fmt(values[0], 3)} … {fmt(values[-1], 3)} by seed"
            )
    of = sorted({d["of"] for d in details if d.get("of")})
    if of:
        words[-1] += f" (of {' / '.join(of)})"
    candidates = sorted({m for d in details for m in d.get("candidates", ())})
    if candidates:
        sources = []
        periods = sorted({d["dominant_period"] for d in details if d.get("dominant_period")})
        if periods:
            sources.append(f"dominant period {', '.join(map(str, periods))}")
        if details[0].get("track_seasons"):
            sources.append(f"the track's {details[0]['track_seasons']}")
        words.append(f"among {candidates}" + (f" ({'; '.join(sources)})" if sources else ""))
    return "; ".join(words) or "–"
