"""A fixed study ledger for the report tests: five arms, a sweep, a failed and a diverged run,
references on every seed, parity, scaling and a mechanism signature, with every number chosen here
(nothing trains, nothing is timed).

``tests/data/report_example.json``, ``.md`` and ``_table.txt`` hold what the report code makes of
it; they were regenerated on purpose when the report gained per-seed references, the sign-flip
interval and the training checks (``python -m tests.report_example`` writes them again).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gridmix.study.ledger import Ledger, RunRow
from gridmix.study.spec import Study
from gridmix.tracks.budget import BUDGETS

DATA = Path(__file__).parent / "data"
BUDGET = dataclasses.replace(
    BUDGETS["default"], name="default", seeds=6, sweep_seeds=2, lrs=(1e-3, 3e-3), epochs=3
)
VERSIONS = dict(gridmix="0.0.0", torch="2.0", timm="1.0", numpy="2.0", python="3.11.0")
FINGERPRINT = dict(
    hash="abc123",
    tensors="def456",
    seed=0,
    grid="8",
    plugin="example",
    plugin_version="1.2",
    source="data.csv",
    source_hash="0f0f",
    sizes=dict(train=128, val=32, test=64),
)

# per model: role, the test metric per comparison seed at its chosen rate (lower is better)
ARMS = {
    "mix": ("idea", [0.50, 0.52, 0.48, 0.51, 0.49, 0.50]),
    "base": ("baseline", [0.60, 0.63, 0.59, 0.62, 0.61, 0.64]),
    "wide": ("baseline", [0.55, 0.50, 0.56, None, 0.47, 0.53]),  # seed 3 failed
    "uncapped": ("ablation", [0.52, 0.51, 0.50, 0.53, 0.50, 0.52]),
    "nomix": ("control", [2.49, 2.50, 2.51, 2.50, 2.49, 2.50]),  # every seed at chance
}
CHANCE, CEILING = 2.5, 0.0


def study() -> Study:
    return Study(
        track="example",
        grid="8",
        models=tuple(ARMS),
        idea="mix",
        matched_baseline="base",
        metric_name="test MSE",
        direction="lower",
        budget=BUDGET,
        device="cpu",
        threads=1,
        data=FINGERPRINT,
        roles={name: role for name, (role, _) in ARMS.items()},
        chance=CHANCE,
        ceiling=CEILING,
        fixed_split=True,
    )


def _row(spec: Study, model: str, lr: float, seed: int, value: float | None, index: int) -> RunRow:
    task = spec.task(model, lr, seed)
    extras = {"test_metrics": {"MAE": round(value / 2, 4)}} if value is not None else {}
    if model == "mix" and value is not None and seed < 100:
        # the cap reached (at least 98 % of it)
        extras["mechanism"] = _signature(0.985 + seed / 1000)
    ok = value is not None
    curve = [value + 0.2, value + 0.1, value + 0.05 * (index % 2)] if ok else []
    return RunRow(
        key=task.key,
        track=spec.track,
        model=model,
        grid=spec.grid,
        lr=lr,
        seed=seed,
        config={},
        status="ok" if ok else "failed",
        val_metric=value,
        test_metric=value,
        train_loss=[1.0, 0.5, 0.25] if ok else [],
        val_curve=curve,
        epochs_done=3 if ok else 0,
        wall_s=1.5 + index / 4,
        threads=1,
        device="cpu",
        versions=VERSIONS,
        error="" if ok else "RuntimeError: worker lost",
        extras=extras,
    )


def _signature(largest: float) -> dict:
    return dict(
        factor_largest_singular_values=[largest, largest / 2],
        probe_norm_ratio_after_mixing=0.7,
        layers=[
            dict(
                axes=[
                    dict(largest=[largest], bound=[1.0]),
                    dict(largest=[largest / 2], bound=[1.0]),
                ]
            )
        ],
        certified_operator_bound=largest,
        certified_token_map_bound=largest * 1.1,
        residual_block_lipschitz=1.3,
    )


def fill(out: Path) -> Path:
    """Write the fixed study into a fresh ledger in ``out``; returns ``out``."""
    spec = study()
    with Ledger(out) as ledger:
        ledger.set_study(spec.to_dict())
        index = 0
        for model, (_, finals) in ARMS.items():
            for lr_index, lr in enumerate(spec.budget.lrs):
                # 3e-3 is better for everyone; the ablation diverged there once
                for seed in spec.sweep_seeds:
                    value = finals[0] + 0.01 * (1 - lr_index)
                    row = _row(spec, model, lr, seed, value, index)
                    if model == "uncapped" and lr_index == 1 and seed == spec.sweep_seeds[0]:
                        row = dataclasses.replace(
                            row, status="diverged", error="loss is nan at epoch 2"
                        )
                    ledger.record(row)
                    index += 1
            chosen = 1e-3 if model == "uncapped" else 3e-3
            for seed, value in zip(spec.comparison_seeds, finals):
                ledger.record(_row(spec, model, chosen, seed, value, index))
                index += 1
        seeds = spec.comparison_seeds  # a fixed split: every seed has the same references
        ledger.put(
            "references",
            dict(
                kind="forecasting",
                seeds=seeds,
                version=2,
                fixed_split=True,
                method="by hand",
                per_seed={"training mean": [2.5] * len(seeds), "persistence": [0.58] * len(seeds)},
                values={"training mean": 2.5, "persistence": 0.58},
                details={
                    "training mean": [{"mean": 0.0}] * len(seeds),
                    "persistence": [{}] * len(seeds),
                },
                extra_metrics={"training mean": {"MAE": 1.2}, "persistence": {"MAE": 0.3}},
                seconds=0.25,
                data=FINGERPRINT["hash"],
            ),
        )
        ledger.put(
            "analyses",
            dict(
                parity=dict(
                    grid="8",
                    batch=4,
                    knobs={},
                    warnings=["wide has 2.1x the idea's parameters"],
                    rows=[
                        dict(
                            model="mix",
                            role="idea",
                            params=1000,
                            flops=2e9,
                            params_ratio=1.0,
                            flops_ratio=1.0,
                            skipped=None,
                        ),
                        dict(
                            model="base",
                            role="baseline",
                            params=1100,
                            flops=2.5e9,
                            params_ratio=0.909,
                            flops_ratio=0.8,
                            skipped=None,
                        ),
                        dict(
                            model="wide",
                            role="baseline",
                            params=None,
                            flops=None,
                            params_ratio=None,
                            flops_ratio=None,
                            skipped="too large",
                        ),
                    ],
                ),
                scaling=dict(
                    batch=4,
                    threads=1,
                    repeats=5,
                    load_average=[
                        3.0,
                        2.5,
                    ],  # above the cores: the report says the machine was busy
                    cpu_count=2,
                    cpu_steal=0.0,
                    points=[
                        _point("8", 1000, 2.0, 3.5, 10.0),
                        _point("16", 1000, 8.0, 12.0, 14.0),
                        _point("32", 1000, 32.0, 50.0, 30.0),
                        dict(
                            model="mix",
                            grid="64",
                            params=None,
                            gflops=None,
                            time_ms=None,
                            peak_mb=None,
                            skipped="failed: out of memory",
                        ),
                    ],
                    fits=[
                        dict(
                            model="mix",
                            quantity="time",
                            exponent=1.918,
                            intercept=-9.676,
                            r2=0.9982,
                            points=3,
                            tail_exponent=None,
                            tail_points=3,
                            exponent_low=0.8865,
                            exponent_high=2.95,
                        ),
                        dict(
                            model="mix",
                            quantity="flops",
                            exponent=2.0,
                            intercept=17.26,
                            r2=1.0,
                            points=3,
                            tail_exponent=None,
                            tail_points=3,
                            exponent_low=2.0,
                            exponent_high=2.0,
                        ),
                        dict(  # a ledger written before fits needed three grids
                            model="mix",
                            quantity="memory",
                            exponent=0.55,
                            intercept=13.0,
                            r2=None,
                            points=2,
                            tail_exponent=0.55,
                            tail_points=2,
                        ),
                    ],
                ),
            ),
        )
    return out


def _point(grid: str, params: int, gflops: float, time_ms: float, peak_mb: float) -> dict:
    """A measured scaling point of the idea, its timed steps spread ±10% around ``time_ms``."""
    seconds = time_ms / 1e3
    return dict(
        model="mix",
        grid=grid,
        params=params,
        gflops=gflops,
        time_ms=time_ms,
        peak_mb=peak_mb,
        skipped=None,
        timing=dict(median_s=seconds, p25_s=0.95 * seconds, p75_s=1.1 * seconds, repeats=5),
    )


def regenerate() -> None:
    """Write the golden files from the report the current code builds of the fixed study (run on
    purpose only)."""
    import json
    import tempfile

    from gridmix.cli.run import results_table
    from gridmix.report.build import build_report
    from gridmix.report.markdown import render_markdown

    with tempfile.TemporaryDirectory() as tmp, Ledger(fill(Path(tmp)), create=False) as ledger:
        report = build_report(ledger)
    (DATA / "report_example.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    (DATA / "report_example.md").write_text(
        render_markdown(report, figures=["paired.png", "curves.png"])
    )
    (DATA / "report_example_table.txt").write_text(results_table(report).plain())


if __name__ == "__main__":
    regenerate()
