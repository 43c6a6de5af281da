"""The harness's A/A false-positive rate: many tiny A/A studies through the real runner, ledger and
report.

    python benchmarks/bench_aa.py --out DIR [--replicates 200] [--seeds 6]

Each replicate trains a small attention model against a copy of itself initialised from another
seed, on the same data, over ``--seeds`` comparison seeds of its own
(:func:`gridmix.orchestrate.calibration.aa_false_positive_rate`). Writes ``DIR/aa.json`` (rate, the
exact test's level, a binomial p for "the rate exceeds the level", every p-value) and prints one
line. A tiny track keeps a replicate well under a second; the harness is the real one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import torch
from timm.layers import Attention
from torch import nn

from gridmix import (
    ConcentrationMixer,
    DataSizes,
    Grid,
    ModelSpec,
    Split,
    Track,
    TrackData,
    load_registry,
)
from gridmix.orchestrate.calibration import aa_false_positive_rate
from gridmix.study.spec import Study
from gridmix.tracks.budget import BUDGETS
from gridmix.tracks.hookspecs import hookimpl

GRID = Grid((8,))


def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
    """A noisy regression on the difference of the two halves' means."""
    gen = torch.Generator().manual_seed(seed)

    def split(count):
        x = torch.randn(count, grid[0], generator=gen)  # (S, n)
        # (S, 1)
        y = x[:, : grid[0] // 2].mean(1, keepdim=True) - x[:, grid[0] // 2 :].mean(1, keepdim=True)
        return Split(x, y + 0.3 * torch.randn(y.shape, generator=gen))

    return TrackData(split(sizes.n_train), split(sizes.n_val), split(sizes.n_test))


class Net(nn.Module):
    def __init__(self, grid: Grid, mixer: nn.Module, dim: int = 8):
        super().__init__()
        self.embed, self.pos = nn.Linear(1, dim), nn.Parameter(torch.zeros(1, grid[0], dim))
        self.norm, self.mixer, self.head = nn.LayerNorm(dim), mixer, nn.Linear(dim, 1)

    def forward(self, x):  # (B, n) -> (B, 1)
        h = self.embed(x[..., None]) + self.pos  # (B, n, C)
        return self.head((h + self.mixer(self.norm(h))).mean(1))  # (B, 1)


TRACK = Track(
    name="aa-probe",
    description="tiny regression for the A/A benchmark",
    ndim=1,
    default_grid=GRID,
    make_data=make_data,
    loss=nn.functional.mse_loss,
    metric=lambda p, t: float(((p - t) ** 2).mean()),
    metric_name="test MSE",
    direction="lower",
    matched_baseline="attention",
    models=(
        ModelSpec(
            "mixer", lambda g: Net(g, ConcentrationMixer(8, g, num_heads=2, rank=4)), role="idea"
        ),
        ModelSpec("attention", lambda g: Net(g, Attention(8, num_heads=2))),
    ),
)


class Probe:
    @hookimpl
    def gridmix_tracks(self):
        return [TRACK]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load_registry(extra_plugins=[Probe()], refresh=True)
    budget = dataclasses.replace(
        BUDGETS["smoke"],
        seeds=args.seeds,
        lrs=(3e-3,),
        epochs=2,
        n_train=64,
        n_val=16,
        n_test=128,
        batch_size=32,
    )
    study = Study(
        track=TRACK.name,
        grid=str(GRID),
        models=("mixer", "attention"),
        idea="mixer",
        matched_baseline="attention",
        metric_name=TRACK.metric_name,
        direction="lower",
        budget=budget,
        device="cpu",
        threads=1,
    )

    def progress(k: int, comparison) -> None:  # a gridmix.report.types.Comparison
        if (k + 1) % 25 == 0:
            print(
                f"A/A replicate {k + 1}/{args.replicates}: p = {comparison.result.p_value:.3g}",
                flush=True,
            )

    with tempfile.TemporaryDirectory() as ledgers:
        result = aa_false_positive_rate(
            study, ledgers, replicates=args.replicates, on_replicate=progress
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "aa.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"A/A false-positive rate {result['significant']}/{result['replicates']} = "
        f"{result['rate']:.4f} (exact level {result['exact_level']:.4f} at {args.seeds} seeds; "
        f"binomial p of a higher rate {result['binomial_p_rate_above_level']:.3g})"
    )
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
