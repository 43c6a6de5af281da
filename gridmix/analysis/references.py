"""Naive references a reviewer checks first, on the same test split as the models, and what the report says of them.

Besides the references, the report flags two training problems (:func:`reference_lines`): a chosen learning
rate on the edge of the sweep, and final runs still improving when the epoch cap ended them.

Classification (int64 class labels ``(S,)``): the majority class of the training split. Forecasting (inputs
``(S, 1, L)``, a context window, and float targets ``(S, H)``, the next values): persistence (the window's last
value for every step ahead) and seasonal naive (the value one season earlier; the season is chosen on the
validation split among :data:`SEASONS` that fit in the window). Each is scored with the track's own metric, so
it is in the models' units. For forecasting the report also gives each model's metric relative to persistence
(an MSE-based analogue of the M4 competition's MASE: below 1 beats persistence).

The references use the data of seed 0; where a track's split does not depend on the seed they are exactly the
models' test split. Shape legend: S samples, L context length, H horizon.
"""

from __future__ import annotations

import torch

from gridmix.grid import Grid
from gridmix.tracks import DataSizes, Track

SEASONS = (4, 7, 12, 24, 52)


def naive_references(track: Track, grid: Grid, sizes: DataSizes) -> dict:
    """``{"kind", "values": {name: metric}}`` for the track's data, or ``{"kind": "none"}`` if no reference fits."""
    data = track.make_data(grid, 0, sizes)
    train, val, test = data.train, data.val, data.test
    if test.targets.dtype == torch.int64 and test.targets.ndim == 1:
        majority = torch.bincount(train.targets).argmax()
        k = int(max(train.targets.max(), test.targets.max())) + 1
        logits = torch.nn.functional.one_hot(majority.expand(len(test)), k).float()  # (S, K)
        return {"kind": "classification", "values": {"majority class": track.metric(logits, test.targets)}}
    windows = test.inputs.ndim == 3 and test.inputs.shape[1] == 1
    if windows and test.targets.ndim == 2 and test.targets.is_floating_point():
        values = {"persistence": track.metric(_persistence(test.inputs, test.targets.shape[1]), test.targets)}
        seasons = [m for m in SEASONS if m <= test.inputs.shape[-1]]
        if seasons:
            best = min(seasons, key=lambda m: track.metric(_seasonal(val.inputs, val.targets.shape[1], m), val.targets)
                       * (1 if track.direction == "lower" else -1))
            values[f"seasonal naive (season {best}, chosen on validation)"] = track.metric(
                _seasonal(test.inputs, test.targets.shape[1], best), test.targets)
        return {"kind": "forecasting", "values": values}
    return {"kind": "none", "values": {}}


def _persistence(inputs: torch.Tensor, horizon: int) -> torch.Tensor:
    return inputs[:, 0, -1:].expand(-1, horizon)  # (S, H)


def _seasonal(inputs: torch.Tensor, horizon: int, season: int) -> torch.Tensor:
    L = inputs.shape[-1]
    steps = torch.arange(horizon) % season  # the value one season (or several) before each step ahead
    return inputs[:, 0, L - season + steps]  # (S, H)


def reference_summary(report: dict) -> dict | None:
    """Which models beat the best naive reference, and (forecasting) each model's metric relative to persistence."""
    refs = report.get("references") or {}
    if not refs.get("values"):
        return None
    lower = report["metric_direction"].startswith("lower")
    best_name = (min if lower else max)(refs["values"], key=refs["values"].get)
    best = refs["values"][best_name]
    arms = {report["idea"]["name"]: report["idea"], **report["baselines"]}
    means = {name: arm["full"]["mean"] for name, arm in arms.items() if arm["full"].get("mean") is not None}
    beats = {name: (mean < best if lower else mean > best) for name, mean in means.items()}
    summary = {"best": best_name, "best_value": best, "beats_best": beats,
               "all_worse": bool(beats) and not any(beats.values())}
    if "persistence" in refs["values"] and refs["values"]["persistence"] > 0:
        summary["relative_to_persistence"] = {n: m / refs["values"]["persistence"] for n, m in means.items()}
    return summary


def edge_learning_rates(report: dict) -> dict[str, float]:
    """Models whose chosen learning rate is the smallest or largest one swept (the optimum may lie beyond)."""
    lrs = sorted(report["budget"]["lrs"])
    arms = {report["idea"]["name"]: report["idea"], **report["baselines"]}
    if len(lrs) < 2:
        return {}
    return {name: arm["best_cfg"]["lr"] for name, arm in arms.items()
            if arm["best_cfg"].get("lr") in (lrs[0], lrs[-1])}


def improving_at_cap(report: dict) -> dict[str, int]:
    """Per model, how many final runs were still improving at the epoch cap (best validation epoch the last)."""
    cap = report["budget"]["epochs"]
    lower = report["metric_direction"].startswith("lower")
    arms = {report["idea"]["name"]: report["idea"], **report["baselines"]}
    counts = {}
    for name, arm in arms.items():
        curves = [c for c in arm.get("curves", {}).get("val", []) if len(c) == cap and cap > 1]
        n = sum(1 for c in curves if c.index(min(c) if lower else max(c)) == cap - 1)
        if n:
            counts[name] = n
    return counts


def reference_lines(report: dict) -> list[str]:
    """The report's Markdown on the naive references and learning rates at the edge of the sweep."""
    lines = []
    summary = reference_summary(report)
    if summary is not None:
        refs = report["references"]
        if summary["all_worse"]:
            lines += [f"**Every model is worse than the naive reference** {summary['best']} "
                      f"({summary['best_value']:.4g} {report['metric']}).", ""]
        lines += ["## Naive references (same test split, seed 0's data)", "", "| reference | value |", "|---|---|"]
        lines += [f"| {name} | {value:.4g} |" for name, value in refs["values"].items()]
        lines += ["", "| model | beats " + summary["best"] + " |"
                  + (" metric / persistence (< 1 beats persistence) |" if "relative_to_persistence" in summary
                     else ""), "|---|---|" + ("---|" if "relative_to_persistence" in summary else "")]
        for name, beats in summary["beats_best"].items():
            rel = summary.get("relative_to_persistence", {})
            lines.append(f"| {name} | {'yes' if beats else 'no'} |" + (f" {rel[name]:.3g} |" if name in rel else ""))
        lines.append("")
    edges = edge_learning_rates(report)
    if edges:
        lines += ["**Learning rate at the edge of the sweep** (the best may lie beyond it; widen `--lrs`): "
                  + ", ".join(f"{name} chose {lr:g}" for name, lr in edges.items())
                  + f" of {sorted(report['budget']['lrs'])}.", ""]
    improving = improving_at_cap(report)
    if improving:
        lines += [f"**Still improving at the cap of {report['budget']['epochs']} epochs** (best validation in the "
                  "last epoch; more epochs or `patience` in the budget may change the result): "
                  + ", ".join(f"{name} in {n} of {report['n_seeds']} seeds" for name, n in improving.items()) + ".",
                  ""]
    return lines
