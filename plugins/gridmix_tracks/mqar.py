"""The built-in ``mqar`` track: multi-query associative recall, next-token prediction at every position.

The autoregressive task of the Zoology study of attention against sub-quadratic mixers (Arora et al.
2023), generated here from its description. A sequence of ``L`` tokens (the grid) starts with ``K``
key–value pairs ``k₁ v₁ k₂ v₂ … k_K v_K``, keys distinct, drawn from the lower half of the vocabulary
(token 0 excluded), values from the upper half. The rest is filler (token 0) with ``Q`` queries at
random even offsets: a query is a key of the context followed by its value. The model predicts the
next token at every position; loss and metric count only the answers, i.e. the positions holding a
query key, whose next token is that key's value. Recalling it means finding the key earlier in the
sequence: content-based lookup, which attention does in one layer and a fixed (time-invariant)
convolution cannot do directly.

Models (the same causal pre-norm transformer, timm ``Block``s run with ``is_causal=True``: token
embedding, learned positions, blocks, norm, a next-token head at every position; dim 64, depth 2, 2 heads):

- ``transformer``: causal attention (the matched baseline);
- ``transformer-concentration``: :class:`gridmix.ConcentrationMixer` with the sequence axis causal
  (the idea; its causal Toeplitz factor, :mod:`gridmix.causal`, started flat: ``start="global"``);
- ``transformer-concentration-uncapped`` (ablation) and ``transformer-nomix`` (control).

Metric: answer cross-entropy in nats, lower is better (chance ``log(vocab / 2)`` = 3.47, a uniform guess
among the values; ceiling 0); ``make_track(metric="accuracy")`` gives answer accuracy instead. Difficulty
knobs: :class:`RecallTask` (vocabulary, pairs, queries) and the sequence length ``--grid`` (e.g. ``--grid 256``).

Calibration (default budget: 2,048 training sequences, 16 epochs, batch 32, lr 3e-3 for every arm and no
sweep, 2,048 test sequences = 8,192 answers; 4 pairs, 4 queries, vocabulary 64, grid 64).
``gridmix run --track mqar --threads 1``, test answer cross-entropy per seed, on the shared 2-core machine:

=================================== ===== ===== ===== ===== ===== ===== =====
seed                                  0     1     2     3     4     5    mean
=================================== ===== ===== ===== ===== ===== ===== =====
transformer (attention)             1.654 1.695 1.657 1.702 1.679 1.658 1.674
transformer-concentration (idea)    2.551 2.458 2.495 2.491 2.535 2.522 2.509
transformer-concentration-uncapped  2.503 2.532 2.446 2.500 2.557 2.437 2.496
transformer-nomix (control)         3.515 3.536 3.520 3.532 3.533 3.530 3.528
=================================== ===== ===== ===== ===== ===== ===== =====

Primary comparison: Δ = 0.834, p = 0.031, MDE 0.0887 = 5.3% of attention's mean (the 5% aimed for is narrowly
missed); no seed of the idea or of attention is near chance, the control sits at it (no mixing, no recall).
Answer accuracy of the same configuration (pilot): attention 0.283–0.297, the idea 0.219–0.236. 13 min 34 s on
the busy machine (729 s of training, runs of 16–121 s); 24 runs of an estimated 16 s each when quiet (the
pilot's 8 s per 8 epochs), so about 6–7 min idle. What the pilot ruled out, each on the same data: accuracy as
the metric (its test noise alone, ≈ 0.009 over 2,048 answers, is the whole spread a 5% MDE of 0.29 allows; the
MDE came to 8.5%); 8 epochs (the old default; the idea still improving, accuracy 0.14–0.19 over 3 seeds); 12
epochs (cross-entropy differences' standard deviation 0.094, MDE ≈ 10%); 4,096 test sequences (MDE 5.4%: the
spread is the training's); 4,096 training sequences × 8 epochs (less overfitting, but the idea's spread grows:
2.60–2.75 over 3 seeds); lr 1e-2 (seed 0: attention 2.47, the idea 3.19, both worse than at 3e-3); grid 32 ×
24 epochs (attention solves the recall on seed 0, cross-entropy 0.003, at the ceiling, while the idea
overfits, 2.22 → 2.34). Epochs tighten the idea's spread (standard deviation of the differences 0.094 at 12,
0.053 at 16), but 20 would not fit the time. Attention's 1.67 is the plateau "one of the 4 values of the
context" (log 4 = 1.39 plus a little); the idea's kernel is a learned time-invariant filter, which cannot look
a key up by content, so it learns less of even that plateau.

Why neither more seeds nor more epochs reach a 5% MDE here. Attention's plateau is not where every seed stays: the
default run with 8 seeds (``--threads 1``, shared machine) reproduced seeds 0–5 and gave seed 6 attention 1.717, the
idea 2.512, but on seed 7 attention left the plateau and recalled (answer cross-entropy 0.324; the idea 2.561). The
differences became bimodal: Δ = 1.005, p = 0.0078, s_d 0.500, MDE 0.588 = 39% of attention's mean 1.511 (seeds 0–6
alone: MDE 0.064 = 3.8%). So the 5.5% of 6 seeds rests on none of them escaping, which one seed in eight did at
this budget; more seeds make that likelier, not rarer. Longer training puts attention past the escape instead:
pilot with 32 epochs (1 thread, lr 3e-3, everything else the default), attention left the plateau at epoch 10, 18
and 21 on seeds 0–2 (answer cross-entropy 0.0008, 0.0047, 0.0243; accuracy 1.000, 1.000, 0.995), while the idea
peaked at epoch 13–17 (validation 2.34–2.43) and then overfitted (test 2.750 and 2.821, accuracy 0.221 and 0.236,
seeds 0–1). In that regime a 5% MDE is out of reach for cross-entropy (attention's mean is near 0) but easy for
accuracy (attention at the ceiling, the idea's seeds 0.015 apart); yet it needs twice the steps (about 11 min idle
with 6 seeds, over the 10 allowed), and with escapes as late as epoch 21 of 32 some seed may still stay on the
plateau. Halfway, 24 epochs (seeds 2–3): attention escaped on seed 3 (0.017, accuracy 0.997) and only partly on
seed 2 (0.750, accuracy 0.738), as bimodal as 16. So the default stays at 6 seeds and 16 epochs.

Shape legend:
    S: samples, L: sequence length (the grid), V: vocabulary; inputs (S, L) int64,
    targets (S, L) int64 (the answer at query positions, ``IGNORE`` elsewhere), predictions (S, L, V)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from timm.models.vision_transformer import Attention, Block
from torch import nn

from gridmix import hookimpl
from gridmix.grid import Grid
from gridmix.models import BackboneConfig, MixerConfig
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData
from gridmix_tracks.common import generated_data

IGNORE = -100  # targets at positions that are not answers (F.cross_entropy's ignore_index)
# weight decay 0.5 (not the budget's 0.05): it turns attention from memorising the 2,048 training sequences to recalling
BUDGET_OVERRIDES = {"default": {"n_train": 2048, "epochs": 20, "n_test": 2048, "lrs": (3e-3,), "weight_decay": 0.5}}


@dataclass(frozen=True)
class RecallTask:
    """Knobs of the recall task: vocabulary, key–value pairs per sequence, queries per sequence."""

    vocab: int = 64
    pairs: int = 4
    queries: int = 4

    def __post_init__(self) -> None:
        if self.vocab < 6 or self.vocab % 2:
            raise ValueError(f"vocab={self.vocab}; expected an even number >= 6 (keys and values take half each)")
        if not 1 <= self.pairs < self.vocab // 2:
            raise ValueError(f"pairs={self.pairs}; expected 1..{self.vocab // 2 - 1} (distinct keys in 1..vocab/2-1)")
        if not 1 <= self.queries <= self.pairs:
            raise ValueError(f"queries={self.queries}; expected 1..pairs={self.pairs}")

    @property
    def min_length(self) -> int:
        """The context (2 per pair) and one slot of 2 per query."""
        return 2 * (self.pairs + self.queries)

    def generate(self, rng: np.random.Generator, n: int, length: int) -> Split:
        half, k = self.vocab // 2, self.pairs
        keys = np.argsort(rng.random((n, half - 1)), axis=1)[:, :k] + 1  # (n, K): distinct, in 1..V/2−1
        values = rng.integers(half, self.vocab, size=(n, k))  # (n, K)
        tokens = np.zeros((n, length), dtype=np.int64)
        tokens[:, 0 : 2 * k : 2], tokens[:, 1 : 2 * k : 2] = keys, values
        targets = np.full((n, length), IGNORE, dtype=np.int64)
        slots = (length - 2 * k) // 2  # places for a query and its answer after the context
        rows = np.arange(n)[:, None]
        which = np.argsort(rng.random((n, k)), axis=1)[:, : self.queries]  # (n, Q): pairs asked, no repeats
        where = 2 * k + 2 * np.sort(np.argsort(rng.random((n, slots)), axis=1)[:, : self.queries], axis=1)
        tokens[rows, where], tokens[rows, where + 1] = keys[rows, which], values[rows, which]
        targets[rows, where] = values[rows, which]  # next token after the query key
        return Split(inputs=torch.from_numpy(tokens), targets=torch.from_numpy(targets))


class CausalAttention(Attention):
    """timm's ``Attention``, always causal (the baseline's blocks never see the future either way)."""

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        return super().forward(x, attn_mask=attn_mask, is_causal=True)


class CausalLM(nn.Module):
    """(B, L) token ids → (B, L, V) next-token logits: embedding, positions, causal blocks, norm, head."""

    def __init__(self, grid: Grid, *, vocab: int, backbone: BackboneConfig, attn_layer: type[nn.Module]) -> None:
        super().__init__()
        self.grid, dim = Grid.parse(grid), backbone.embed_dim
        self.embed = nn.Embedding(vocab, dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.grid.numel, dim))
        self.blocks = nn.ModuleList(Block(dim, num_heads=backbone.num_heads, mlp_ratio=backbone.mlp_ratio,
                                          qkv_bias=True, attn_layer=attn_layer) for _ in range(backbone.depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        trunc_normal_(self.pos_embed, std=0.02)
        trunc_normal_(self.embed.weight, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2 or tokens.shape[1] != self.grid.numel:
            raise ValueError(f"expected token ids (B, {self.grid.numel}); got {tuple(tokens.shape)}")
        x = self.embed(tokens) + self.pos_embed  # (B, L, C)
        for block in self.blocks:
            x = block(x, is_causal=True)
        return self.head(self.norm(x))  # (B, L, V)


def answer_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the next token at answer positions only: logits (S, L, V), targets (S, L)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def answer_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean cross-entropy (nats) of the answers (targets ≠ IGNORE) over a whole split (``make_track(metric=
    "cross-entropy")``)."""
    return answer_loss(logits, targets).item()


def answer_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Fraction of answers (targets ≠ IGNORE) whose arg-max logit is the answer: the track's metric."""
    answers = targets != IGNORE
    return (logits.argmax(dim=-1)[answers] == targets[answers]).float().mean().item()


METRICS = ("accuracy", "cross-entropy")


@dataclass(frozen=True)
class RecallModels:
    """The causal language models for a vocabulary; ``specs()`` gives their ModelSpecs."""

    vocab: int = 64
    backbone: BackboneConfig = BackboneConfig(embed_dim=64, depth=2, num_heads=2, mlp_ratio=2.0)
    mixer: MixerConfig = field(default_factory=lambda: MixerConfig(causal_axes=(0,), start="global"))

    def _backbone(self, mlp_ratio: float | None) -> BackboneConfig:
        return self.backbone if mlp_ratio is None else dataclasses.replace(self.backbone, mlp_ratio=mlp_ratio)

    def transformer(self, grid: Grid, *, mlp_ratio: float | None = None) -> CausalLM:
        return CausalLM(grid, vocab=self.vocab, backbone=self._backbone(mlp_ratio), attn_layer=CausalAttention)

    def transformer_concentration(self, grid: Grid, *, mlp_ratio: float | None = None,
                                  kind: str = "concentration") -> CausalLM:
        mixer = dataclasses.replace(self.mixer, kind=kind)
        return CausalLM(grid, vocab=self.vocab, backbone=self._backbone(mlp_ratio),
                        attn_layer=mixer.attn_layer(Grid.parse(grid)))

    def transformer_uncapped(self, grid: Grid, *, mlp_ratio: float | None = None) -> CausalLM:
        return self.transformer_concentration(grid, mlp_ratio=mlp_ratio, kind="uncapped")

    def transformer_nomix(self, grid: Grid, *, mlp_ratio: float | None = None) -> CausalLM:
        return self.transformer_concentration(grid, mlp_ratio=mlp_ratio, kind="tokenwise")

    def specs(self) -> tuple[ModelSpec, ...]:
        b = self.backbone
        size = f"dim {b.embed_dim}, depth {b.depth}, {b.num_heads} heads, MLP x{b.mlp_ratio:g}"
        return (
            ModelSpec("transformer", self.transformer, description=f"causal transformer, causal attention ({size})"),
            ModelSpec("transformer-concentration", self.transformer_concentration, role="idea",
                      width_knob="mlp_ratio", description="the same transformer with ConcentrationMixer, "
                                                          "sequence axis causal, as token mixer"),
            ModelSpec("transformer-concentration-uncapped", self.transformer_uncapped, role="ablation",
                      description="the idea without its eigenvalue cap (ablation)"),
            ModelSpec("transformer-nomix", self.transformer_nomix, role="control",
                      description="the same transformer with no token mixing (TokenwiseMixer; control)"),
        )


def make_track(task: RecallTask = RecallTask(), *, metric: str = "accuracy") -> Track:
    """The ``mqar`` track with the given task knobs; ``metric`` ``"accuracy"`` (higher is better; chance: a uniform
    guess among the ``vocab // 2`` values, ``2 / vocab``) or ``"cross-entropy"`` (lower; chance ``log(vocab / 2)``)."""
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r}; expected one of {METRICS}")
    by_cross_entropy = metric == "cross-entropy"

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        return generated_data(lambda rng, n: task.generate(rng, n, grid[0]), seed=seed, sizes=sizes, task="mqar")

    def supports(grid: Grid) -> str | None:
        if grid[0] < task.min_length:
            return (f"{task.pairs} pairs and {task.queries} queries need at least {task.min_length} tokens; "
                    f"got {grid[0]}")
        return None

    return Track(
        name="mqar",
        description=f"multi-query associative recall: {task.pairs} key-value pairs, {task.queries} queries, "
                    f"vocabulary {task.vocab}; next-token {metric} on the answers",
        ndim=1,
        default_grid=Grid((32,)),
        make_data=make_data,
        loss=answer_loss,
        metric=answer_cross_entropy if by_cross_entropy else answer_accuracy,
        metric_name=f"answer {metric}",
        direction="lower" if by_cross_entropy else "higher",
        models=RecallModels(vocab=task.vocab).specs(),
        matched_baseline="transformer",
        chance=math.log(task.vocab / 2) if by_cross_entropy else 2 / task.vocab,  # a guess among the values
        ceiling=0.0 if by_cross_entropy else 1.0,
        budget_overrides=BUDGET_OVERRIDES,
        supports=supports,
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``mqar`` track."""
    return [make_track()]
