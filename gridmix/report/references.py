"""What the report says of the naive references (:mod:`gridmix.analysis.references`) and of two training problems:
which models beat the best reference (and, forecasting, each model relative to persistence), a chosen learning rate
on the edge of the sweep, and final runs still improving when the epoch cap ended them (:func:`reference_lines`)."""

from __future__ import annotations

from gridmix.report.format import fmt
from gridmix.report.types import Report


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
        extras = "".join(f" {fmt(ref_extras.get(name, {}).get(e))} |" for e in extra_names)
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
            cells.append(fmt(relative[name]))
        cells += [fmt(model_extras.get(name, {}).get(e)) for e in extra_names]
        lines.append("| " + " | ".join(cells) + " |")
    if any(name.startswith("MASE") for name in extra_names):
        lines.append("")
        lines.append("MASE: the forecasts' mean absolute error over the test windows divided by the in-sample mean "
                     "absolute error of the naive forecast m steps back on the training series (as in the M4 "
                     "competition); below 1 beats that in-sample naive error.")
    return lines + [""]


