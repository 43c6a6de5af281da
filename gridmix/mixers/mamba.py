"""The Mamba mixer: a Mamba-2 (SSD) selective state-space scan as a token mixer on an N-d grid.

Follows Dao & Gu 2024, "Transformers are SSMs: Generalized Models and Efficient Algorithms Through
Structured State Space Duality" (Mamba-2). Per head, along a line of tokens ``t = 1 … n``,

    h_t = exp(Δ_t A) h_{t-1} + Δ_t x_t B_tᵀ,    y_t = h_t C_t + D x_t,

with ``Δ_t = softplus(dt_t + dt_bias)`` per head and token, ``A = −exp(A_log)`` a scalar per head
(Mamba-2's scalar-times-identity A), ``B_t, C_t`` of size ``d_state`` shared by the heads (one
group) and ``x_t`` a head's ``p`` channels; ``x``, ``z`` (the gate), ``B``, ``C`` and ``dt`` all
come from one input projection, as in Mamba-2. The scan is computed by the chunked SSD algorithm
(``ssd_minimal.py`` of ``state-spaces/mamba``, written again here): within a chunk of
``chunk_size`` tokens the masked quadratic form ``(C Bᵀ ∘ L) (Δ x)``, across chunks the state
passed on by the decay between them. The block is Mamba-2's: ``x, B, C`` through a short depthwise
convolution and SiLU, the scan, ``D`` skip, ``RMSNorm(y · SiLU(z))`` and the output projection;
initialisation as Mamba-2 (``Δ`` log-uniform in [0.001, 0.1] through ``dt_bias``, ``A`` uniform in
[1, 16], ``D = 1``).

**On an N-d grid** every axis is scanned in both directions (forward and reversed along the axis),
each direction with its own ``B``, ``C``, ``dt`` projections, ``dt_bias``, ``A_log`` and ``D``
(shared ``x``, ``z`` and output projection), and the directions' outputs are averaged: VMamba's
cross-scan (Liu et al. 2024, four directions on images, their outputs merged) extended to every
axis, with Vision Mamba's bidirectional average (Zhu et al. 2024, the forward and backward outputs
divided by two). A causal axis is scanned forward only, and exactly causal: a later token has zero
gradient. What differs from them, and why:

- each scan runs along one **line** of the grid (the other coordinates fixed), its state starting
  at zero on every line, where VMamba flattens the whole image and carries the state from the end
  of one row to the start of the next. Line scans keep every axis exactly causal on its own (a
  flattened scan can be causal along one axis only, its slowest), and a layer sees the lines
  through a token (the cross of axial attention); depth reaches the rest of the grid;
- the short convolution is :class:`~gridmix.mixers.short_conv.ShortConv` (three taps per axis,
  causal on causal axes) on the grid, as VMamba's depthwise 3x3 convolution, instead of Mamba-2's
  causal ``Conv1d`` of four taps along the one sequence;
- ``d_state`` is 16 (Mamba-2 uses 64 to 128 at larger widths) and the head count is the
  backbone's ``num_heads`` (Mamba-2 fixes the head size at 64).

Prefix tokens (class / register tokens) are not on the grid: they pass through unchanged.
Resolution change (:func:`regrid_mamba`): no parameter depends on the grid's lengths, so the same
module scans the new grid's lines; the same grid gives the same mixer bit for bit.

Shape legend:
    B: batch, P: prefix tokens, N: grid tokens, C: channels, E: inner channels (expand · C),
    h: heads, p = E / h, S: d_state, K: scan directions, R: lines (batch · other axes),
    T: tokens on a line, G: chunks, L: tokens per chunk
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.contract import taken
from gridmix.mixers.grids import GridMixer, factory_kwargs, linear
from gridmix.mixers.short_conv import ShortConv

DT_MIN, DT_MAX, DT_FLOOR = 0.001, 0.1, 1e-4  # Mamba-2's dt_min, dt_max, dt_init_floor
A_RANGE = (1.0, 16.0)  # Mamba-2's A_init_range
CHUNK_SIZE = 32  # tokens per SSD chunk: measured (docs/mixers.md); the result does not depend on it


def scan_directions(grid: Grid, causal_axes: Sequence[int]) -> tuple[tuple[int, bool], ...]:
    """The scans as ``(axis, reversed)``: every axis forward, and reversed unless it is causal."""
    return tuple(
        (axis, backward)
        for axis in range(grid.ndim)
        for backward in ((False,) if axis in causal_axes else (False, True))
    )


def to_lines(t: torch.Tensor, axis: int, backward: bool, d: int) -> torch.Tensor:
    """(B, *grid, …) → (R, T, …), ``d`` the grid's rank: the lines along ``axis`` (reversed if
    ``backward``), the other grid axes folded into the batch."""
    t = t.movedim(axis + 1, d).flatten(0, d - 1)  # (R, T, …)
    return t.flip(1) if backward else t


def _exclusive_decay(log_decay: torch.Tensor) -> torch.Tensor:
    """``exp(Σ_{j < s ≤ i} log_decay_s)`` for ``j <= i`` and 0 above the diagonal: (…, T) → (…, T,
    T). The sum is a difference of cumulative sums, masked before the exponential (so a masked entry
    is never evaluated, and has zero gradient)."""
    T = log_decay.shape[-1]
    total = log_decay.cumsum(-1)  # (…, T)
    lower = torch.ones(T, T, dtype=torch.bool, device=log_decay.device).tril()  # (T, T)
    return (total[..., :, None] - total[..., None, :]).masked_fill(~lower, -math.inf).exp()


def ssd(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    chunk_size: int,
) -> torch.Tensor:
    """The SSD scan of every line from a zero state, chunked (module docstring), without the ``D``
    skip.

    ``x`` (R, T, h, p), ``dt`` (R, T, h) (after softplus), ``A`` (h,) (negative), ``B`` and ``C``
    (R, T, S); returns ``y`` (R, T, h, p).
    """
    R, T, h, p = x.shape
    L = min(chunk_size, T)
    G = math.ceil(T / L)
    pad = G * L - T  # zero steps after the last token: they come last, so no output sees them
    x, dt, B, C = (F.pad(t, [0, 0] * (t.dim() - 2) + [0, pad]) for t in (x, dt, B, C))
    xdt = (x * dt[..., None]).reshape(R, G, L, h, p).permute(0, 3, 1, 2, 4)  # (R, h, G, L, p)
    a = (dt * A).reshape(R, G, L, h).permute(0, 3, 1, 2)  # (R, h, G, L): log decay per step
    B, C = B.reshape(R, 1, G, L, -1), C.reshape(R, 1, G, L, -1)  # (R, 1, G, L, S)
    a_cum = a.cumsum(-1)  # (R, h, G, L)
    # within a chunk: the masked quadratic form
    scores = (C @ B.mT) * _exclusive_decay(a)  # (R, h, G, L, L)
    y = scores @ xdt  # (R, h, G, L, p)
    if G == 1:  # a line of one chunk: no state enters it
        return y.permute(0, 2, 3, 1, 4).reshape(R, L, h, p)[:, :T]  # (R, T, h, p)
    # each chunk's final state from its own tokens, then the state entering each chunk
    to_end = (a_cum[..., -1:] - a_cum).exp()  # (R, h, G, L)
    states = (xdt * to_end[..., None]).mT @ B  # (R, h, G, p, S)
    chunk_log = a_cum[..., -1]  # (R, h, G)
    passing = _exclusive_decay(F.pad(chunk_log, (1, 0)))[..., :-1, 1:]  # (R, h, G, G)
    entering = (passing @ states.flatten(-2)).unflatten(-1, (p, -1))  # (R, h, G, p, S)
    y = y + (C @ entering.mT) * a_cum.exp()[..., None]  # (R, h, G, L, p)
    return y.permute(0, 2, 3, 1, 4).reshape(R, G * L, h, p)[:, :T]  # (R, T, h, p)


class MambaMixer(GridMixer):
    """Mamba-2 scans along every axis of ``grid`` (module docstring); timm's ``attn_layer``
    contract through :class:`~gridmix.mixers.grids.GridMixer` (the output projection, too, in at
    least float32).

    Args:
        dim: channels ``C``.
        grid: the grid, e.g. ``"8x16x16"``.
        num_heads: heads ``h``; ``expand · dim`` must be a multiple.
        d_state: the state size ``S`` per head.
        expand: inner channels ``E = expand · dim``.
        chunk_size: tokens per chunk of the SSD algorithm (the result does not depend on it).
        proj_bias: the bias of the output projection.
        grid_kwargs: :class:`~gridmix.mixers.grids.GridMixer`'s: ``causal_axes`` (axes scanned
            forward only, exactly causal), ``num_prefix_tokens`` (passed through unchanged),
            ``device`` and ``dtype`` (of the parameters).
    """

    expected, described = "a MambaMixer", "the {d}-d Mamba mixer on {grid}"

    def __init__(
        self,
        dim: int,
        grid: GridLike,
        *,
        num_heads: int,
        d_state: int = 16,
        expand: int = 2,
        chunk_size: int = CHUNK_SIZE,
        proj_bias: bool = True,
        **grid_kwargs,
    ) -> None:
        counts = dict(num_heads=num_heads, d_state=d_state, expand=expand, chunk_size=chunk_size)
        super().__init__(dim, grid, counts, **grid_kwargs)
        if (expand * dim) % num_heads:
            raise ValueError(
                f"num_heads={num_heads}; expected a divisor of expand * dim = {expand * dim}"
            )
        self.directions = scan_directions(self.grid, self.causal_axes)
        self.num_heads, self.d_state, self.inner, self.chunk_size = (
            num_heads,
            d_state,
            expand * dim,
            chunk_size,
        )
        K, E, S, h = len(self.directions), self.inner, d_state, num_heads
        factory = factory_kwargs(grid_kwargs)
        # z, x, then per direction B, C and dt
        self.in_proj = nn.Linear(dim, 2 * E + K * (2 * S + h), bias=False, **factory)
        self.conv = ShortConv(E + 2 * K * S, self.grid.ndim, self.causal_axes, **factory)  # x, B, C
        dt = torch.exp(
            torch.rand(K, h, **factory) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN)
        ).clamp(min=DT_FLOOR)  # (K, h)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # (K, h): softplus⁻¹(dt)
        self.A_log = nn.Parameter(torch.empty(K, h, **factory).uniform_(*A_RANGE).log())  # (K, h)
        self.D = nn.Parameter(torch.ones(K, h, **factory))  # (K, h)
        self.norm = nn.RMSNorm(E, eps=1e-5, **factory)
        self.out_proj = nn.Linear(E, dim, bias=proj_bias, **factory)

    def scan(self, u: torch.Tensor) -> torch.Tensor:
        """The gated, normalised scans before the output projection: (B, *grid, C) → (B, *grid,
        E), in ``u``'s dtype (float32 or float64)."""
        E, S, h, K, d = (
            self.inner,
            self.d_state,
            self.num_heads,
            len(self.directions),
            self.grid.ndim,
        )
        projected = linear(self.in_proj, u)  # (B, *grid, 2E + K(2S + h))
        z, xBC, dt = projected.split([E, E + 2 * K * S, K * h], dim=-1)
        xBC = F.silu(self.conv(xBC))  # (B, *grid, E + 2KS)
        x, BC = xBC.split([E, 2 * K * S], dim=-1)  # (B, *grid, E), (B, *grid, 2KS)
        x = x.unflatten(-1, (h, E // h))  # (B, *grid, h, p)
        BC = BC.unflatten(-1, (K, 2, S))  # (B, *grid, K, 2, S)
        dt = F.softplus(dt.unflatten(-1, (K, h)) + self.dt_bias.to(u.dtype))  # (B, *grid, K, h)
        A = -self.A_log.to(u.dtype).exp()  # (K, h)
        D = self.D.to(u.dtype)  # (K, h)
        dts, BCs = dt.unbind(-2), BC.unbind(-3)  # K × (B, *grid, h), K × (B, *grid, 2, S)
        total = x * D.sum(0)[:, None]  # (B, *grid, h, p): the directions' D skips
        for k, (axis, backward) in enumerate(self.directions):
            B_k, C_k = BCs[k].unbind(-2)  # (B, *grid, S) each
            y = ssd(
                *(to_lines(t, axis, backward, d) for t in (x, dts[k])),  # (R, T, h, p), (R, T, h)
                A[k],
                *(to_lines(t, axis, backward, d) for t in (B_k, C_k)),  # (R, T, S) each
                self.chunk_size,
            )  # (R, T, h, p)
            y = y.flip(1) if backward else y  # (R, T, h, p)
            moved = x.movedim(axis + 1, d).shape  # (B, …, n, h, p): the grid with the axis last
            total = total + y.reshape(moved).movedim(d, axis + 1)  # (B, *grid, h, p)
        y = (total / K).flatten(-2)  # (B, *grid, E): the directions' average
        gated = y * F.silu(z)  # (B, *grid, E)
        return F.rms_norm(gated, (E,), self.norm.weight.to(u.dtype), self.norm.eps)  # (B, *grid, E)

    def mix(self, u: torch.Tensor) -> torch.Tensor:
        """The whole mixer on the grid tokens: (B, *grid, C) → (B, *grid, C), in ``u``'s dtype."""
        return linear(self.out_proj, self.scan(u))  # (B, *grid, C)

    def repr_parts(self) -> tuple[str, ...]:
        return (
            f"heads={self.num_heads}",
            f"d_state={self.d_state}",
            f"directions={self.directions}",
            f"chunk_size={self.chunk_size}",
        )


def regrid_mamba(module: MambaMixer, grid: GridLike) -> MambaMixer:
    """The same Mamba mixer on another grid of the same rank: a copy with the same parameters (none
    depends on the axes' lengths), bit-identical on its own grid."""
    return MambaMixer.copy_onto(module, grid, caller="regrid_mamba")


def build_mamba(dim: int, grid: GridLike, *, num_heads: int, **kwargs) -> MambaMixer:
    """The registry's builder (:mod:`gridmix.mixers.contract`): a :class:`MambaMixer`; the keyword
    arguments it takes pass on, timm's others (``qkv_bias``, ``attn_drop``, ``norm_layer`` …) are
    accepted and ignored."""
    return MambaMixer(dim, grid, num_heads=num_heads, **taken(kwargs, MambaMixer.keywords()))
