"""Naive references a reviewer checks first, on the same test split as the models, and what the report says of them.

Besides the references, the report flags two training problems (:func:`reference_lines`): a chosen learning
rate on the edge of the sweep, and final runs still improving when the epoch cap ended them.

Classification (int64 class labels ``(S,)``): the majority class of the training split, predicted as the
training class frequencies (log-probabilities whose argmax is the majority class), so that an accuracy scores
the majority class and a cross-entropy the class prior, never a confident one-hot guess. Forecasting (inputs
``(S, C, L)``, a context window whose channel 0 is the forecast series' own past and whose other channels, if
any, are covariates, and float targets ``(S, H)``, the next values): persistence (the window's last value for
every step ahead) and seasonal naive (the value one season earlier; the season is chosen on the validation
split among :data:`SEASONS` that fit in the window). Each is scored with the track's own metric, so it is in
the models' units, and with the track's :attr:`~gridmix.tracks.Track.extra_metrics` (e.g. MASE). For
forecasting the report also gives each model's metric relative to persistence (below 1 beats persistence) and
the mean over seeds of the extra metrics each run measured on its test predictions (:func:`with_model_metrics`).

The references use the data of seed 0; where a track's split does not depend on the seed they are exactly the
models' test split. Shape legend: S samples, L context length, H horizon.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from gridmix.grid import Grid
from gridmix.report_format import fmt
from gridmix.tracks import DataSizes, Track

if TYPE_CHECKING:
    from gridmix.report_types import Report

SEASONS = (4, 7, 12, 24, 52)


def naive_references(track: Track, grid: Grid, sizes: DataSizes) -> dict:
    """``{"kind", "values": {name: metric}}`` for the track's data, or ``{"kind": "none"}`` if no reference fits.

    With :attr:`Track.extra_metrics` (e.g. MASE), ``"extra_metrics": {name: {metric name: value}}`` scores each
    reference with them too.
    """
    data = track.make_data(grid, 0, sizes)
    train, val, test = data.train, data.val, data.test
    if test.targets.dtype == torch.int64 and test.targets.ndim == 1:
        k = int(max(train.targets.max(), test.targets.max())) + 1
        counts = torch.bincount(train.targets, minlength=k).float()  # (K,)
        prior = (counts + 0.5) / (counts.sum() + 0.5 * k)  # the training frequencies, smoothed: no class at p = 0
        forecasts = {"majority class": prior.log().expand(len(test), k)}  # (S, K): argmax is the majority class
        kind = "classification"
    elif test.inputs.ndim == 3 and test.targets.ndim == 2 and test.targets.is_floating_point():
        forecasts = {"persistence": _persistence(test.inputs, test.targets.shape[1])}  # (S, H)
        seasons = [m for m in SEASONS if m <= test.inputs.shape[-1]]
        if seasons:
            best = min(seasons, key=lambda m: track.metric(_seasonal(val.inputs, val.targets.shape[1], m), val.targets)
                       * (1 if track.direction == "lower" else -1))
            forecasts[f"seasonal naive (season {best}, chosen on validation)"] = _seasonal(
                test.inputs, test.targets.shape[1], best)  # (S, H)
        kind = "forecasting"
    else:
        return {"kind": "none", "values": {}}
    references = {"kind": kind, "values": {name: track.metric(f, test.targets) for name, f in forecasts.items()}}
    if track.extra_metrics:
        references["extra_metrics"] = {name: {metric: float(measure(f, test.targets))
                                              for metric, measure in track.extra_metrics.items()}
                                       for name, f in forecasts.items()}
    return references


def _persistence(inputs: torch.Tensor, horizon: int) -> torch.Tensor:
    return inputs[:, 0, -1:].expand(-1, horizon)  # (S, H): channel 0 is the forecast series' past


def _seasonal(inputs: torch.Tensor, horizon: int, season: int) -> torch.Tensor:
    L = inputs.shape[-1]
    steps = torch.arange(horizon) % season  # the value one season (or several) before each step ahead
    return inputs[:, 0, L - season + steps]  # (S, H)


def with_model_metrics(references: dict | None, final_rows: dict[str, list]) -> dict | None:
    """``references`` with ``"models": {model: {metric name: mean over seeds}}`` of the runs' extra test metrics.

    ``final_rows`` holds per model its final runs' ledger rows (``None`` where missing); a run that failed or
    has no ``extras["test_metrics"]`` (e.g. a ledger written before the track had them) is left out. The
    references are returned as they are when no run measured any extra metric.
    """
    models = {}
    for model, rows in final_rows.items():
        measured = [row.extras["test_metrics"] for row in rows
                    if row is not None and row.status == "ok" and "test_metrics" in row.extras]
        if measured:
            names = {name for metrics in measured for name in metrics}
            models[model] = {name: float(np.mean([m[name] for m in measured if name in m])) for name in sorted(names)}
    if not models:
        return references
    return dict(references or {"kind": "none", "values": {}}, models=models)


def reference_summary(report: Report) -> dict | None:
    """Which models beat the best naive reference, and (forecasting) each model's metric relative to persistence."""
    refs = report.references or {}
    if not refs.get("values"):
        return None
    lower = report.lower_is_better
    best_name = (min if lower else max)(refs["values"], key=refs["values"].get)
    best = refs["values"][best_name]
    means = {name: arm.mean for name, arm in report.arms.items() if arm.mean is not None}
    beats = {name: (mean < best if lower else mean > best) for name, mean in means.items()}
    summary = {"best": best_name, "best_value": best, "beats_best": beats,
               "all_worse": bool(beats) and not any(beats.values())}
    if "persistence" in refs["values"] and refs["values"]["persistence"] > 0:
        summary["relative_to_persistence"] = {n: m / refs["values"]["persistence"] for n, m in means.items()}
    return summary


def edge_learning_rates(report: Report) -> dict[str, float]:
    """Models whose chosen learning rate is the smallest or largest one swept (the optimum may lie beyond)."""
    lrs = sorted(report.budget["lrs"])
    if len(lrs) < 2:
        return {}
    return {name: arm.lr for name, arm in report.arms.items() if arm.lr in (lrs[0], lrs[-1])}


def improving_at_cap(report: Report) -> dict[str, int]:
    """Per model, how many final runs were still improving at the epoch cap (best validation epoch the last)."""
    cap = report.budget["epochs"]
    lower = report.lower_is_better
    counts = {}
    for name, arm in report.arms.items():
        curves = [c for c in arm.val if len(c) == cap and cap > 1]
        n = sum(1 for c in curves if c.index(min(c) if lower else max(c)) == cap - 1)
        if n:
            counts[name] = n
    return counts


def reference_lines(report: Report) -> list[str]:
    """The report's Markdown on the naive references and learning rates at the edge of the sweep."""
    lines = []
    summary = reference_summary(report)
    if summary is not None:
        lines += _reference_tables(report, summary)
    edges = edge_learning_rates(report)
    if edges:
        lines += ["**Learning rate at the edge of the sweep** (the best may lie beyond it; widen `--lrs`): "
                  + ", ".join(f"{name} chose {lr:g}" for name, lr in edges.items())
                  + f" of {sorted(report.budget['lrs'])}.", ""]
    improving = improving_at_cap(report)
    if improving:
        lines += [f"**Still improving at the cap of {report.budget['epochs']} epochs** (best validation in the "
                  "last epoch; more epochs or `patience` in the budget may change the result): "
                  + ", ".join(f"{name} in {n} of {report.n_seeds} seeds" for name, n in improving.items()) + ".",
                  ""]
    return lines


def _reference_tables(report: Report, summary: dict) -> list[str]:
    """The references' values, then per model whether it beats them (and its extra metrics, e.g. MASE)."""
    refs = report.references
    ref_extras, model_extras = refs.get("extra_metrics") or {}, refs.get("models") or {}
    extra_names = sorted({name for table in (ref_extras, model_extras) for metrics in table.values()
                          for name in metrics})
    lines = []
    if summary["all_worse"]:
        lines += [f"**Every model is worse than the naive reference** {summary['best']} "
                  f"({fmt(summary['best_value'])} {report.metric}).", ""]
    lines += ["## Naive references (same test split, seed 0's data)", "",
              "| reference | " + " | ".join([report.metric, *extra_names]) + " |",
              "|---|---|" + "---|" * len(extra_names)]
    for name, value in refs["values"].items():
        extras = "".join(f" {fmt(ref_extras.get(name, {}).get(e), 3)} |" for e in extra_names)
        lines.append(f"| {name} | {fmt(value)} |" + extras)
    relative = summary.get("relative_to_persistence")
    persistence_column = relative is not None and summary["best"] != "persistence"
    columns = ["model", f"beats {summary['best']}"] + (["beats persistence"] if persistence_column else [])
    columns += [f"{report.metric} / persistence"] if relative is not None else []
    columns += [f"{name} (mean over seeds)" for name in extra_names]
    lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for name, beats in summary["beats_best"].items():
        cells = [name, "yes" if beats else "no"]
        if persistence_column:
            cells.append("yes" if relative[name] < 1 else "no")
        if relative is not None:
            cells.append(fmt(relative[name], 3))
        cells += [fmt(model_extras.get(name, {}).get(e), 3) for e in extra_names]
        lines.append("| " + " | ".join(cells) + " |")
    if any(name.startswith("MASE") for name in extra_names):
        lines.append("")
        lines.append("MASE: the forecasts' mean absolute error over the test windows divided by the in-sample mean "
                     "absolute error of the naive forecast m steps back on the training series (as in the M4 "
                     "competition); below 1 beats that in-sample naive error.")
    return lines + [""]


