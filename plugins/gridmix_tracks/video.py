"""The built-in ``video`` track: does the scene's tint flip sign half-way through the clip (a cut)?

The grid is time × height × width (one pixel per token, one channel). Every frame shows a scene of
one tint with a square of another moving across it (side a quarter of the frame's: 2x2 on 8x8; one
pixel a frame in one of 8 directions, wrapping around the edges), under Gaussian noise (σ = 1) on
every pixel. Tints have random signs (fair coins) and magnitudes (uniform in 0.5..1); at the middle
frame (``T // 2``) the scene's tint is drawn again, its magnitude anew and its sign either kept or
flipped. The label says whether it flipped (1) or not (0), balanced, and 10 % of the labels are
flipped, so the expected test cross-entropy (the metric, lower is better) cannot go below H(0.1) ≈
0.325 nats (the track's ``ceiling``; one test set of 1024 can read a little lower) and a model's
spread stays off zero, where a continuous metric would lose it; chance is ln 2 ≈ 0.693.

The task needs token mixing across time: any one token's value has the same distribution under both
labels (the square's tint is independent of the label), and "flipped" is an XOR of the two halves'
signs, so a model whose logit is a sum of per-token terms (no token mixing: per-token features,
average pooling, a linear head) reaches at most 75 % accuracy and, in cross-entropy, nothing: as
each token is label-blind, E[(1/2 − y)·z] = 0 for such a logit z, and the cross-entropy
E[softplus(z) − y·z] = E[ln(2·cosh(z/2))] + E[(1/2 − y)·z] is then at least ln 2, whatever the
noise, learning rate or budget (tests/test_tracks.py fits free per-token terms: 0.97 held out,
overfitted). So the no-mixing control stays at chance by construction. Mixing over the whole clip is
enough: the clip's mean is large when the sign is kept and small when it flips (on 8x8x8, noise-free
and the square included: at least 0.40 in size against at most 0.30), which attention's uniform
start, and the mixer's global one, hand every token at step 0. The earlier version of this track
("how many of three identical squares move?", accuracy) had no such signal: the clip's mean did not
depend on the label, so dense attention, the matched baseline, stayed at chance (0.244 against 0.25)
and no comparison with it could say anything.

The mixer starts near the averaging operator on every axis (``MixerConfig(start="global")``,
docs/mixer.md "Where the mixer starts"); global over time only (a running mean at each place, a blur
in space: the start of the earlier task) did a little worse in a first pilot (seeds 0, 1 at 3e-3:
0.3481, 0.3368 against 0.3411, 0.3311).

Why 1e-3 (the one rate of the calibration below; the default budget now sweeps 5e-4, 1e-3 and 2e-3
on one sweep seed, staying below 3e-3, so that a choice at the edge of the sweep can be flagged; its
run time is to be measured). The label is an even function of the clip (flipping every sign keeps
it), so every model starts on a plateau at ln 2 and has to learn a product of the mixed clip mean
with itself or with each token. At 3e-3 (the earlier default) runs left the plateau in their first
epoch and then could overshoot at the top of the schedule (warm-up ends at step 77 of 768) and never
come back. ``gridmix run --track video --threads 2`` at 3e-3: dense attention, the matched baseline,
stayed at chance on seed 1 (0.6959; MDE 68 % of the baseline); with 1 thread and batches of 16 it
had stalled on seed 4, and the idea at 1e-2 on 3 seeds of 6. Dense attention, seed 1, 2 threads, the
default budget otherwise (train loss per epoch, validation after the first epoch, test; a shared
2-core machine):

=======================  ==================================================  ==========  ======
setting                  train loss per epoch                                val, ep. 0  test
=======================  ==================================================  ==========  ======
lr 3e-3 (before)         0.656, 0.711, 0.700, 0.696, 0.693, 0.692            0.784       0.6959
lr 1e-3 (as built)       0.540, 0.333, 0.335, 0.325, 0.326, 0.323            0.346       0.3278
lr 3e-3, noise σ = 0.5   0.454, 0.431, 0.333 (first 3 epochs; 1 thread)      0.755       –
=======================  ==================================================  ==========  ======

The stalled run's attention was still uniform at the end (mean entropy 0.996 of ln N in both
blocks): the clip's mean still reached every token; what the spike broke, it seems, was the part of
the network that reads it. Less noise did not stop the spike; a lower rate did. 1e-3 on more seeds
(test cross-entropy; with 2 threads, seeds 0–5, the default run below; with 1 thread, seeds 0–11, a
pilot at the default budget):

========================  =======================================================================
arm, threads, seeds       test cross-entropy per seed (worst)
========================  =======================================================================
dense attention, 2, 0–5   0.3394, 0.3278, 0.3217, 0.3250, 0.3539, 0.3234 (0.3539)
dense attention, 1, 0–11  0.3394, 0.3276, 0.3223, 0.3252, 0.3540, 0.3226, 0.3643, 0.2907, 0.3292,
                          0.3432, 0.3123, 0.3058 (0.3643)
idea, 2, 0–5              0.3383, 0.3311, 0.3174, 0.3254, 0.3533, 0.3241 (0.3533)
idea, 1, 0–11             0.3383, 0.3311, 0.3174, 0.3247, 0.3533, 0.3236, 0.3683, 0.2777, 0.3309,
                          0.3333, 0.3121, 0.3082 (0.3683)
========================  =======================================================================

No run stayed at chance, but the margin is not wide: with 1 thread on seed 9 both dense attention
and the idea still spiked after their first epoch (validation 0.782 and 0.819) and came back, and
dense attention on seed 11 left the plateau only in its third epoch (train loss 0.689, 0.681, 0.398,
…; test 0.3058). A budget with fewer steps than these 768, or a higher rate, would stall some seeds
again.

Results at the default budget (per seed, the comparisons, the run time): docs/calibration.md,
"What the default budget measured"; this docstring keeps the pilots that chose the task and budget.

Models (same embedding, learned positions, depth, width, MLP, norms and head; they differ in the
token mixer only): dense spatio-temporal attention over all T·H·W tokens (the matched baseline),
factorised (divided) space-time attention as TimeSformer's (not in the default run: ``--models``
reaches it), and the concentration mixer; for the mechanism, the idea without its eigenvalue cap
(ablation) and with no token mixing (control).

Shape legend:
    S: samples, T, H, W: the grid; inputs (S, 1, T, H, W) float32, targets (S,) int64 in {0, 1}
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.mixers.builtin import BUILTIN
from gridmix.models import BackboneConfig, GridTransformer, MixerConfig
from gridmix.tracks import Backbone, DataSizes, ModelSpec, Split, Track, TrackData
from gridmix_tracks.arms import attention_arm, idea_arms, mixer_backbone, network_size
from gridmix_tracks.common import binary_entropy, cross_entropy, generated_data, mean_cross_entropy

# (dy, dx) per direction of motion: E, NE, N, NW, W, SW, S, SE
DIRECTIONS = np.array([(0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1), (1, 0), (1, 1)])
MIN_FRAMES, MIN_SIDE = 3, 4
# Dense attention over 512 tokens is the expensive model: 768 steps of 8 clips (1024 samples, 6
# epochs), a larger test set for the continuous metric; a sweep of three rates around 1e-3 on one
# sweep seed (1e-3 was the one rate before: at 3e-3 a run could leave the chance plateau in its
# first epoch, spike past ln 2 at the peak rate and stay at chance, module docstring), so the sweep
# stays below 3e-3 and a choice at its edge means something. Divided attention is left out of the
# default run for time (``--models`` still reaches it).
BUDGET_OVERRIDES = {
    "default": {
        "n_train": 1024,
        "n_val": 256,
        "n_test": 1024,
        "epochs": 6,
        "batch_size": 8,
        "lrs": (5e-4, 1e-3, 2e-3),
        "sweep_seeds": 1,
    }
}
DEFAULT_MODELS = ("concentration", "dense-attention", "concentration-uncapped", "tokenwise")


@dataclass(frozen=True)
class CutTask:
    """Settings of the synthetic cut task (the defaults are calibrated; see the module
    docstring)."""

    noise: float = 1.0  # per-pixel Gaussian noise
    tints: tuple[float, float] = (
        0.5,
        1.0,
    )  # tint magnitudes are uniform in this range, signs fair coins
    label_noise: float = (
        0.1  # fraction of labels flipped: test cross-entropy cannot go below H(0.1) ≈ 0.325
    )

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        T, H, W = grid.shape
        side, cut = max(1, min(H, W) // 4), T // 2
        labels = rng.integers(0, 2, size=n)  # 1: the scene's tint flips sign at the cut
        before = rng.choice([-1.0, 1.0], size=n) * rng.uniform(*self.tints, size=n)
        after = (
            np.where(labels == 1, -1.0, 1.0) * np.sign(before) * rng.uniform(*self.tints, size=n)
        )
        tint = np.where(np.arange(T)[None, :] < cut, before[:, None], after[:, None])  # (n, T)
        videos = rng.normal(0.0, self.noise, size=(n, T, H, W)) + tint[:, :, None, None]
        # independent of the label
        square = rng.choice([-1.0, 1.0], size=n) * rng.uniform(*self.tints, size=n)
        start = np.stack([rng.integers(0, H, n), rng.integers(0, W, n)], axis=1)  # (n, 2)
        velocity = DIRECTIONS[rng.integers(0, len(DIRECTIONS), size=n)]  # (n, 2)
        # (n, T, 2)
        corners = start[:, None, :] + np.arange(T)[None, :, None] * velocity[:, None, :]
        _paint(videos, corners, side, square[:, None] - tint)
        labels = np.where(rng.random(n) < self.label_noise, 1 - labels, labels)
        inputs = torch.from_numpy(videos[:, None].astype(np.float32))
        return Split(inputs=inputs, targets=torch.from_numpy(labels))


def _paint(videos: np.ndarray, corners: np.ndarray, side: int, change: np.ndarray) -> None:
    """Add ``change`` (n, T) to a side × side square at ``corners`` (n, T, 2) in every frame,
    wrapping around."""
    n, T, H, W = videos.shape
    sample, frame = np.meshgrid(np.arange(n), np.arange(T), indexing="ij")
    for dy in range(side):
        for dx in range(side):
            videos[sample, frame, (corners[..., 0] + dy) % H, (corners[..., 1] + dx) % W] += change


@dataclass(frozen=True)
class VideoModels:
    """The video models; ``specs()`` gives their ModelSpecs."""

    num_classes: int = 2
    readout: str = "mean"
    backbone: BackboneConfig = BackboneConfig(embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0)
    # Near the averaging operator on every axis: the clip's mean, which tells the label, shows at
    # step 0 as in attention's uniform start (docs/mixer.md, "Where the mixer starts").
    mixer: MixerConfig = field(default_factory=lambda: MixerConfig(start="global"))

    def with_mixer(
        self, grid: Grid, attn_layer: type[torch.nn.Module], *, mlp_ratio: float | None = None
    ) -> GridTransformer:
        """This network with a registered mixer's ``attn_layer`` as token mixer (the track's
        :class:`Backbone`)."""
        backbone = (
            self.backbone
            if mlp_ratio is None
            else dataclasses.replace(self.backbone, mlp_ratio=mlp_ratio)
        )
        return GridTransformer(
            Grid.parse(grid),
            in_chans=1,
            num_outputs=self.num_classes,
            backbone=backbone,
            attn_layer=attn_layer,
            readout=self.readout,
        )

    def backbone_spec(self) -> Backbone:
        """How the track builds a model around a registered mixer, named as the mixer
        (``global-filter``)."""
        return mixer_backbone(self.with_mixer, self.mixer)

    def specs(self) -> tuple[ModelSpec, ...]:
        """The track's models, each built around a registered mixer (``Backbone.model``)."""
        backbone = self.backbone_spec()
        head = "mean-pool head" if self.readout == "mean" else "per-token head"
        size = network_size(self.backbone, head)
        divided = backbone.model(
            "divided-attention",
            BUILTIN["divided-attention"],
            description="TimeSformer-style divided attention: over time per location, then "
            "over space",
        )
        joint = f"joint space-time attention over all T·H·W tokens ({size})"
        idea = f" (rank {self.mixer.rank}, time axis symmetric)"
        return (
            attention_arm(backbone, "dense-attention", joint),
            divided,
            *idea_arms(backbone, "network", idea),
        )


def grid_supported(grid: Grid) -> str | None:
    """A cut needs a frame before it and two after; the square (a quarter of the frame's side) room
    to move."""
    T, H, W = grid.shape
    if T < MIN_FRAMES or min(H, W) < MIN_SIDE:
        return f"needs at least {MIN_FRAMES} frames of at least {MIN_SIDE}x{MIN_SIDE}; got {grid}"
    return None


def make_track(task: CutTask = CutTask(), start: str | tuple[str, ...] = "global") -> Track:
    """The ``video`` track with the given task settings."""

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        return generated_data(
            lambda rng, n: task.generate(rng, n, grid), seed=seed, sizes=sizes, task="video"
        )

    return Track(
        name="video",
        description="does the scene's tint flip sign half-way through the clip? (a moving square, "
        "noise, 10 % labels flipped)",
        ndim=3,
        default_grid=Grid((8, 8, 8)),
        make_data=make_data,
        loss=cross_entropy,
        metric=mean_cross_entropy,
        metric_name="test cross-entropy",
        direction="lower",
        models=VideoModels(mixer=MixerConfig(start=start)).specs(),
        backbone=VideoModels(mixer=MixerConfig(start=start)).backbone_spec(),
        matched_baseline="dense-attention",
        budget_overrides=BUDGET_OVERRIDES,
        default_models=DEFAULT_MODELS,
        chance=math.log(2),
        ceiling=binary_entropy(task.label_noise),
        supports=grid_supported,
        fixed_grid=None,  # the same task at every grid it supports
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``video`` track."""
    return [make_track()]
