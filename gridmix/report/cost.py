"""The cost beside the verdict: the idea's parameters, FLOPs and training time as ratios to its
matched baseline's, each labelled with how it was measured.

One sentence for the headline of report.md and the terminal summary of ``gridmix run``: the parity
audit's parameters and forward+backward FLOPs (:mod:`gridmix.analysis.parity`) and the ledger's wall
clock per run and per training step (``Report.timings``). A figure the report does not hold (no
parity audit, a failed one, a model without runs) is left out; with none, there is no sentence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridmix.report.format import fmt

if TYPE_CHECKING:
    from gridmix.report.types import Report


def cost_words(report: Report) -> str | None:
    """``mix vs base: 0.95x the parameters and 0.09x the FLOPs (...); 0.2x the training time per
    run (...) and 0.21x per training step (...)``, or None when neither parity nor timings cover
    the idea and its matched baseline."""
    idea, baseline = report.idea, report.primary_baseline
    if baseline is None:
        return None
    parts = [
        words
        for words in (_parity_words(report, idea, baseline), _time_words(report, idea, baseline))
        if words
    ]
    if not parts:
        return None
    return f"{idea} vs its matched baseline {baseline}: " + "; ".join(parts)


def _parity_words(report: Report, idea: str, baseline: str) -> str | None:
    parity = report.analyses.get("parity") or {}
    rows = {row["model"]: row for row in parity.get("rows", []) if not row["skipped"]}
    if idea not in rows or baseline not in rows:
        return None
    row = rows[baseline]
    return (
        f"{_ratio(row['params_ratio'])} the parameters ({fmt(rows[idea]['params'])} vs "
        f"{fmt(row['params'])}) and {_ratio(row['flops_ratio'])} the FLOPs (torch's "
        f"FlopCounterMode, forward+backward of one batch of {parity['batch']} at grid "
        f"{parity['grid']})"
    )


def _time_words(report: Report, idea: str, baseline: str) -> str | None:
    per_model = (report.timings or {}).get("per_model", {})
    a, b = per_model.get(idea), per_model.get(baseline)
    if not a or not b or not b["median_run_s"]:
        return None
    words = (
        f"{_ratio(a['median_run_s'] / b['median_run_s'])} the training time per run "
        f"({fmt(a['median_run_s'], 3)} s vs {fmt(b['median_run_s'], 3)} s, median wall clock "
        f"over {a['runs']} and {b['runs']} runs)"
    )
    step_a, step_b = a.get("median_step_ms"), b.get("median_step_ms")
    if step_a and step_b:
        words += (
            f" and {_ratio(step_a / step_b)} per training step ({fmt(step_a, 3)} ms vs "
            f"{fmt(step_b, 3)} ms, a run's wall clock over its epochs × batches, median over runs)"
        )
    return words


def _ratio(value: float) -> str:
    """A ratio to three significant digits with its ``x``: ``0.0912x``, ``1.05x``."""
    return f"{value:.3g}x"
