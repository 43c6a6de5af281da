"""A tiny in-test track plugin: a 1-D regression with a mixer idea, an attention baseline and a
model that diverges (non-finite output) at the larger learning rate only, so the harness's handling
of divergence is exercised deterministically. Its task is defined on every grid
(``fixed_grid=None``), its models hold learned positions (``pos_embed``), and it has one setting,
the models' width ``dim``. :func:`smoke_study` runs a finished study of it for a test to read."""

import contextlib
import sys
from pathlib import Path

import torch
from timm.layers import Attention
from torch import nn

from gridmix import Grid, mixer_layer
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData
from gridmix.tracks.hookspecs import hookimpl


def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
    gen = torch.Generator().manual_seed(seed)
    n = grid[0]

    def split(count):
        x = torch.randn(count, n, generator=gen)
        y = torch.stack(
            [x[:, : n // 2].mean(1) - x[:, n // 2 :].mean(1), x.roll(1, 1)[:, 0] * 0.5], dim=1
        )
        return Split(x, y)

    return TrackData(split(sizes.n_train), split(sizes.n_val), split(sizes.n_test))


class Net(nn.Module):
    def __init__(self, grid: Grid, mixer: nn.Module, dim: int = 8):
        super().__init__()
        self.embed = nn.Linear(1, dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, grid[0], dim))
        self.norm = nn.LayerNorm(dim)
        self.attn = mixer
        self.head = nn.Linear(dim, 2)

    def forward(self, x):  # (B, n) -> (B, 2)
        h = self.embed(x[..., None]) + self.pos_embed  # (B, n, C)
        h = h + self.attn(self.norm(h))
        return self.head(h.mean(1))


class _UnitGradient(torch.autograd.Function):
    """Forward 0, backward 1: AdamW then moves the weight by about lr per step, whatever the
    loss."""

    @staticmethod
    def forward(ctx, w):
        return torch.zeros_like(w)

    @staticmethod
    def backward(ctx, grad):
        return torch.ones_like(grad)


class Fragile(Net):
    """Turns non-finite once its drift weight passes a threshold: after ~8 steps at lr 3e-3, never
    at 1e-3."""

    def __init__(self, grid):
        super().__init__(grid, Attention(8, num_heads=2))
        self.drift = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        out = super().forward(x) + _UnitGradient.apply(self.drift)
        return out * float("nan") if self.drift.abs() > 0.008 else out


def _mse(pred, target):
    return float(((pred - target) ** 2).mean())


def make_track(dim: int = 8) -> Track:
    """The fake track with models of width ``dim`` (its one setting)."""
    return Track(
        name="fake",
        description="tiny 1-D regression for harness tests",
        ndim=1,
        default_grid=Grid((8,)),
        make_data=make_data,
        loss=nn.functional.mse_loss,
        metric=_mse,
        metric_name="test MSE",
        direction="lower",
        models=(
            ModelSpec(
                "fake-mixer",
                lambda grid: Net(
                    grid, mixer_layer("concentration", grid, rank=4)(dim, num_heads=2), dim
                ),
                role="idea",
            ),
            ModelSpec(
                "fake-attention",
                lambda grid: Net(grid, mixer_layer("attention", grid)(dim, num_heads=2), dim),
            ),
            ModelSpec("fake-fragile", Fragile),
        ),
        matched_baseline="fake-attention",
        fixed_grid=None,
        settings={"dim": dim},
        rebuild=make_track,
    )


TRACK = make_track()


@hookimpl
def gridmix_tracks():
    return [TRACK]


@contextlib.contextmanager
def smoke_study(out: Path):
    """Run ``gridmix run --track fake`` at the smoke budget (2 seeds, one thread, no scaling) into
    ``out``; the track stays registered inside the block, where the finished study can be read."""
    from typer.testing import CliRunner

    from gridmix.cli import app
    from gridmix.tracks.plugin_loader import load_registry

    load_registry(extra_plugins=[sys.modules[__name__]], refresh=True)
    try:
        arguments = ["run", "--track", "fake", "--budget", "smoke", "--seeds", "2"]
        arguments += ["--threads", "1", "--no-scaling", "--out", str(out)]
        result = CliRunner().invoke(app, arguments, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        yield
    finally:
        load_registry(refresh=True)
