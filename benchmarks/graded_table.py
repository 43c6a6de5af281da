"""Print the markdown table of a graded track's ladder from a finished ``gridmix sweep`` over its
``difficulty``: per rung, every arm's mean and range across the paired seeds, and every arm's
paired comparison against the matched baseline (dense attention), Holm-adjusted across the arms
of the rung (:func:`gridmix.analysis.verdicts.compare_many`).

Run from the repository root, after the sweep (docs/tracks.md, "Calibration"):
``python benchmarks/graded_table.py runs/recall-ladder``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gridmix.analysis.verdicts import compare_many, named_by_role


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
        reference = found[baseline]["per_seed"]
        results = compare_many(
            {name: (arm["per_seed"], reference) for name, arm in found.items() if name != baseline},
            direction=direction,
        )
        rung = ", ".join(f"{value}" for value in point["values"].values())
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


if __name__ == "__main__":
    out = Path(sys.argv[1])
    print(table(json.loads((out / "sweep_report.json").read_text())))
