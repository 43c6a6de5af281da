"""The built-in ``image`` track: "do the two far-apart squares have the same colour?" on a token grid.

Each image is exactly grid-sized (one pixel per token) with one channel per colour (2 colours, one-hot)
under Gaussian noise (σ = 1.15) on every channel. Two squares (side 3/8 of the shorter grid side: 12
tokens on 32x32) sit far apart: the Chebyshev distance of their corners is 4/3 of a side or more (16
tokens, half the grid, on 32x32), so a gap of at least a third of a side separates them. The label says
whether they have the same colour (1) or not (0), balanced. "Same" is an XOR of the two squares' colours:
per-token features, average pooling and a linear head reach at most 75 % (by thresholding one colour's
area: both squares of that colour, or not), so accuracy above 0.75 shows that a model brought the two
far-apart regions together and compared them nonlinearly, i.e. mixed tokens across the grid.

At the default budget (docs/plugins.md) the outcome is bimodal per seed: a model either takes off and
solves the task (about 0.99) or stays near chance or the 0.75 shortcut; measured means over 6 seeds are
about 0.80 (ViT), 0.76 (mixer) and 0.73 (MLP-Mixer).

Models: timm's ``VisionTransformer`` with dense attention (the matched baseline), the same class with the
concentration mixer as ``attn_layer`` (the idea) and timm's MLP-Mixer (dense token MLP, small grids only);
for the mechanism, the idea without its eigenvalue cap (ablation) and with no token mixing (control).

Shape legend:
    S: samples, H, W: the grid, K: colours; inputs (S, K, H, W) float32, targets (S,) int64 in {0, 1}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from gridmix import hookimpl
from gridmix.grid import Grid
from gridmix.models import BackboneConfig, MixerConfig, build_mlp_mixer, build_vit, mlp_mixer_supports
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData
from gridmix_tracks.common import accuracy, cross_entropy, generated_data

MIN_SIDE = 8
# 1024 tokens make dense attention the expensive model: 384 small steps keep a full default comparison of
# the three models under 12 minutes on 2 CPU cores (docs/plugins.md, "Budgets of the built-in tracks").
BUDGET_OVERRIDES = {"default": {"n_train": 1024, "n_val": 128, "epochs": 3, "batch_size": 8, "sweep_seeds": 1}}


@dataclass(frozen=True)
class SameColourTask:
    """Knobs of the synthetic task (the defaults are calibrated; see docs/plugins.md)."""

    colours: int = 2  # one input channel each
    side_fraction: float = 3 / 8  # square side relative to the shorter grid side (12 tokens on 32x32)
    noise: float = 1.15  # per-pixel Gaussian noise on every channel

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        H, W = grid.shape
        side = max(1, round(min(H, W) * self.side_fraction))
        far = min(round(4 / 3 * side), max(H, W) - side)  # a gap of a third of a side between the squares
        images = rng.normal(0.0, self.noise, size=(n, self.colours, H, W))
        labels = rng.integers(0, 2, size=n)
        colour_a = rng.integers(0, self.colours, size=n)
        colour_b = np.where(labels == 1, colour_a, (colour_a + rng.integers(1, self.colours, size=n)) % self.colours)
        corner_a = _corners(rng, n, H, W, side)
        corner_b = _corners(rng, n, H, W, side)
        while (redo := np.abs(corner_a - corner_b).max(axis=1) < far).any():
            corner_a[redo] = _corners(rng, int(redo.sum()), H, W, side)
            corner_b[redo] = _corners(rng, int(redo.sum()), H, W, side)
        for corner, colour in ((corner_a, colour_a), (corner_b, colour_b)):
            for dy in range(side):
                for dx in range(side):
                    images[np.arange(n), colour, corner[:, 0] + dy, corner[:, 1] + dx] += 1.0
        return Split(inputs=torch.from_numpy(images.astype(np.float32)), targets=torch.from_numpy(labels))


def _corners(rng: np.random.Generator, n: int, H: int, W: int, side: int) -> np.ndarray:
    return np.stack([rng.integers(0, H - side + 1, n), rng.integers(0, W - side + 1, n)], axis=1)


@dataclass(frozen=True)
class ImageModels:
    """The image models for one input format; ``specs()`` gives their ModelSpecs."""

    in_chans: int
    num_classes: int
    backbone: BackboneConfig = BackboneConfig(embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0)
    mixer: MixerConfig = field(default_factory=MixerConfig)

    def vit(self, grid: Grid, *, mlp_ratio: float | None = None) -> torch.nn.Module:
        return build_vit(grid, in_chans=self.in_chans, num_outputs=self.num_classes, backbone=self._backbone(mlp_ratio))

    def vit_concentration(self, grid: Grid, *, mlp_ratio: float | None = None, kind: str = "concentration"
                          ) -> torch.nn.Module:
        mixer = dataclasses.replace(self.mixer, kind=kind)
        return build_vit(grid, in_chans=self.in_chans, num_outputs=self.num_classes,
                         backbone=self._backbone(mlp_ratio), attn_layer=mixer.attn_layer(grid))

    def vit_uncapped(self, grid: Grid, *, mlp_ratio: float | None = None) -> torch.nn.Module:
        return self.vit_concentration(grid, mlp_ratio=mlp_ratio, kind="uncapped")

    def vit_nomix(self, grid: Grid, *, mlp_ratio: float | None = None) -> torch.nn.Module:
        return self.vit_concentration(grid, mlp_ratio=mlp_ratio, kind="tokenwise")

    def mlp_mixer(self, grid: Grid, *, mlp_ratio: float | None = None) -> torch.nn.Module:
        return build_mlp_mixer(grid, in_chans=self.in_chans, num_outputs=self.num_classes,
                               backbone=self._backbone(mlp_ratio))

    def _backbone(self, mlp_ratio: float | None) -> BackboneConfig:
        return self.backbone if mlp_ratio is None else dataclasses.replace(self.backbone, mlp_ratio=mlp_ratio)

    def specs(self) -> tuple[ModelSpec, ...]:
        b = self.backbone
        size = f"dim {b.embed_dim}, depth {b.depth}, {b.num_heads} heads, MLP x{b.mlp_ratio:g}, patch 1, avg pool"
        return (
            ModelSpec("vit", self.vit, description=f"timm VisionTransformer, dense attention ({size})"),
            ModelSpec("vit-concentration", self.vit_concentration, role="idea", width_knob="mlp_ratio",
                      description=f"the same timm VisionTransformer with ConcentrationMixer "
                                  f"(rank {self.mixer.rank}) as attn_layer"),
            ModelSpec("mlp-mixer", self.mlp_mixer, supports=mlp_mixer_supports,
                      description=f"timm MlpMixer (dim {b.embed_dim}, depth {b.depth}, token MLP x0.5, "
                                  f"channel MLP x{b.mlp_ratio:g})"),
            ModelSpec("vit-concentration-uncapped", self.vit_uncapped, role="ablation",
                      description="the idea without its eigenvalue cap (softplus eigenvalues), same everything else"),
            ModelSpec("vit-nomix", self.vit_nomix, role="control",
                      description="the same ViT with no token mixing (TokenwiseMixer: W_o W_v per token)"),
        )


def grid_supported(grid: Grid) -> str | None:
    """The task needs room for two far-apart squares."""
    if min(grid) < MIN_SIDE:
        return f"every side must be at least {MIN_SIDE} tokens; got {grid}"
    return None


def make_track(task: SameColourTask = SameColourTask()) -> Track:
    """The ``image`` track with the given task knobs."""

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        return generated_data(lambda rng, n: task.generate(rng, n, grid), seed=seed, sizes=sizes, task="image")

    return Track(
        name="image",
        description="do the two far-apart squares have the same colour? (noisy)",
        ndim=2,
        default_grid=Grid((32, 32)),
        make_data=make_data,
        loss=cross_entropy,
        metric=accuracy,
        metric_name="accuracy",
        direction="higher",
        models=ImageModels(in_chans=task.colours, num_classes=2).specs(),
        matched_baseline="vit",
        budget_overrides=BUDGET_OVERRIDES,
        chance=0.5,
        ceiling=1.0,
        supports=grid_supported,
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``image`` track."""
    return [make_track()]
