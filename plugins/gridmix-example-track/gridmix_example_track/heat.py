"""The ``heat`` track: predict a 2-D temperature field four diffusion steps ahead.

The initial field is a sum of three Gaussian bumps of random place, width and sign on a periodic
grid, plus a little noise; the target is the field after four explicit steps of the heat equation
``u ← u + 0.2 · Δu`` (five-point Laplacian, periodic). One prediction per token, mean squared error.

Shape legend:
    S: samples, H, W: the grid; inputs (S, 1, H, W) float32, targets (S, H·W) float32
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gridmix import Backbone, DataSizes, Grid, Split, Track, TrackData
from gridmix.mixers.builtin import BUILTIN
from gridmix.models import BackboneConfig, MixerConfig, build_vit

STEPS, RATE, BUMPS, NOISE = 4, 0.2, 3, 0.05
BACKBONE = BackboneConfig(embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0)
MIXER = MixerConfig(rank=8)  # the concentration mixer of the idea and its ablation


def diffuse(fields: np.ndarray, *, steps: int = STEPS, rate: float = RATE) -> np.ndarray:
    """``steps`` explicit heat-equation steps on (S, H, W) periodic fields."""
    for _ in range(steps):
        laplacian = (
            sum(np.roll(fields, shift, axis) for shift in (1, -1) for axis in (1, 2)) - 4 * fields
        )
        fields = fields + rate * laplacian
    return fields


def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
    """Independent samples per split, each split from its own generator seeded by (seed, split)."""
    H, W = grid.shape
    y, x = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")

    def split(index: int, n: int) -> Split:
        rng = np.random.default_rng([seed, index])
        centre_y, centre_x = (
            rng.uniform(0, H, (n, BUMPS, 1, 1)),
            rng.uniform(0, W, (n, BUMPS, 1, 1)),
        )
        width = rng.uniform(1.5, 4.0, (n, BUMPS, 1, 1))
        sign = rng.choice([-1.0, 1.0], (n, BUMPS, 1, 1))
        dy = np.minimum(np.abs(y - centre_y), H - np.abs(y - centre_y))  # periodic distances
        dx = np.minimum(np.abs(x - centre_x), W - np.abs(x - centre_x))
        fields = (sign * np.exp(-(dy**2 + dx**2) / (2 * width**2))).sum(axis=1)
        fields = fields + rng.normal(0.0, NOISE, fields.shape)
        targets = diffuse(fields).reshape(n, H * W)
        return Split(
            inputs=torch.from_numpy(fields[:, None].astype(np.float32)),
            targets=torch.from_numpy(targets.astype(np.float32)),
        )

    return TrackData(
        train=split(0, sizes.n_train), val=split(1, sizes.n_val), test=split(2, sizes.n_test)
    )


def vit(
    grid: Grid, attn_layer: type[nn.Module] | None = None, *, mlp_ratio: float = BACKBONE.mlp_ratio
) -> nn.Module:
    """A ViT with one output per token: (B, 1, H, W) → (B, H·W); ``attn_layer`` replaces attention
    (None: timm's)."""
    backbone = dataclasses.replace(BACKBONE, mlp_ratio=mlp_ratio)
    model = build_vit(
        grid, in_chans=1, num_outputs=1, backbone=backbone, attn_layer=attn_layer, global_pool=""
    )
    return nn.Sequential(model, nn.Flatten(1))


def heat_track() -> Track:
    """Every model is the ViT around a registered mixer (``Backbone.model``), so they differ in the
    token mixer only."""
    kwargs = MIXER.mixer_kwargs()
    backbone = Backbone(
        vit,
        prefix="vit",
        width_kwarg="mlp_ratio",
        mixer_kwargs={"concentration": kwargs, "concentration-uncapped": kwargs},
    )
    return Track(
        name="heat",
        description=f"predict a 2-D heat field {STEPS} diffusion steps ahead (per-token "
        "regression)",
        ndim=2,
        default_grid=Grid((16, 16)),
        make_data=make_data,
        loss=F.mse_loss,
        metric=lambda predictions, targets: F.mse_loss(predictions, targets).item(),
        metric_name="test MSE",
        direction="lower",
        models=(
            backbone.model(
                "vit",
                BUILTIN["attention"],
                description="timm ViT, dense attention, one output per token",
            ),
            backbone.model(
                "vit-concentration",
                BUILTIN["concentration"],
                role="idea",
                width_kwarg="mlp_ratio",
                description="the same ViT with ConcentrationMixer as attn_layer",
            ),
            backbone.model(
                "vit-concentration-uncapped",
                BUILTIN["concentration-uncapped"],
                role="ablation",
                description="the idea without its eigenvalue cap (softplus eigenvalues)",
            ),
            backbone.model(
                "vit-tokenwise",
                BUILTIN["tokenwise"],
                role="control",
                description="the same ViT with no token mixing",
            ),
        ),
        matched_baseline="vit",
        budget_overrides={"smoke": {"epochs": 3}},
        ceiling=0.0,
        backbone=backbone,
    )
