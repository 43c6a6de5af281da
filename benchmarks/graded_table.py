"""Print the markdown table of a graded track's ladder from a finished ``gridmix sweep`` over its
``difficulty``, or of one rung from a finished ``gridmix run``: per rung, every arm's mean and range
across the paired seeds, and every arm's paired comparison against the matched baseline (dense
attention), Holm-adjusted across the arms of the rung
(:func:`gridmix.analysis.verdicts.compare_many`).

Run from the repository root, after the sweep or the run (docs/tracks.md, "Calibration"):
``python benchmarks/graded_table.py runs/recall-ladder``. A run's directory (no
``sweep_report.json``) is read from its ledger: the same report ``gridmix run`` wrote, as one rung
named by its ``difficulty``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gridmix.analysis.verdicts import compare_many, named_by_role
from gridmix.report.build import build_report
from gridmix.report.sweep_report import PointReport
from gridmix.study.ledger import Ledger, LedgerError
from gridmix.tracks.plugin_loader import load_registry


def table(document: dict) -> str:
    """The markdown table of a sweep report's document (``sweep_report.json``): one row per rung
    and arm."""
    baseline = document["baseline"]
    direction = document["metric_direction"].split()[0]  # "higher is better" → "higher"
    rows = [
        "| rung | model | mean (min–max over seeds) | Δ vs " + baseline + " | p (exact) | p (Holm) "
        "| MDE | verdict |",
        "|" + " --- |" * 8,
    ]
    for point in document["points"]:
        found = {name: arm for name, arm in point["arms"].items() if arm["per_seed"]}
        rung = ", ".join(f"{value}" for value in point["values"].values())
        if baseline not in found:
            raise SystemExit(f"error: {rung}: {baseline} has no finished comparison run yet")
        reference = found[baseline]["per_seed"]
        results = compare_many(
            {name: (arm["per_seed"], reference) for name, arm in found.items() if name != baseline},
            direction=direction,
        )
        for name, arm in sorted(found.items(), key=lambda item: item[0] != baseline):
            seeds = arm["per_seed"]
            cells = [rung, name, f"{arm['mean']:.3f} ({min(seeds):.3f}–{max(seeds):.3f})"]
            if name == baseline:
                cells += ["–"] * 5
            else:
                result = results[name]
                mde = "–" if result.mde is None else f"{result.mde:.3f}"
                cells += [
                    f"{result.delta_mean:+.3f}",
                    f"{result.p_value:.3f}",
                    f"{result.p_holm:.3f}",
                    mde,
                    named_by_role(result.verdict, "").strip(),  # said of the row's model
                ]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def run_document(out: Path) -> dict:
    """A finished ``gridmix run``'s report in the shape of a sweep's document: one point, named by
    the run's rung (the track's ``difficulty``, its default included; the track on a track without
    a ladder)."""
    try:
        ledger = Ledger(out, create=False)
    except LedgerError as error:
        raise SystemExit(f"error: {error}") from None
    with ledger:
        spec = ledger.study()
        if spec is None:
            raise SystemExit(f"error: {out} holds neither sweep_report.json nor a study's ledger")
        report = build_report(ledger)
    settings = load_registry().track(spec["track"], spec.get("settings") or {}).settings
    rung = {"difficulty": settings["difficulty"]} if "difficulty" in settings else {}
    point = PointReport(values=rung or {"track": spec["track"]}, report=report)
    return dict(
        baseline=report.primary_baseline,
        metric_direction=report.metric_direction,
        points=[point.to_dict()],
    )


if __name__ == "__main__":
    out = Path(sys.argv[1])
    swept = out / "sweep_report.json"
    print(table(json.loads(swept.read_text()) if swept.exists() else run_document(out)))
