"""The semiseparable causal factor's chunked scan in torch ops: the form for CUDA, float64 and the
double backward.

The kernel is ``κ_h[k] = Σ_q w_hq λ_hq^k`` for ``0 ≤ k < n`` (``r`` terms per head, ``0 < λ < 1``):
the lower-triangular Toeplitz matrix ``T[i, j] = κ_h[i − j]`` of
:mod:`gridmix.mixers.concentration.ops.causal`, but with ``2r`` numbers per head instead of ``n``
(S4D / Mamba-2's semiseparable form).
:class:`gridmix.mixers.concentration.factors.SemiseparableFactor` sets ``w`` so that ``‖κ_h‖₁``
equals its gain exactly (the certificate); this module applies ``T`` to a tensor.

:func:`gridmix.mixers.concentration.ops.semiseparable.semiseparable_mode_product` runs the fused
recurrence of :mod:`gridmix.mixers.concentration.ops.semiseparable_native` where it applies (float32
on the CPU); elsewhere, and for that kernel's double backward, :func:`torch_mode_product` here cuts
the axis into chunks of ``b`` positions (zeros padded at the end):

* inside a chunk, the dense lower-triangular Toeplitz block of ``κ[:b]`` (one GEMM per head; exact
  zeros above the diagonal);
* each chunk's end state ``s_q(c) = Σ_a λ_q^(b−1−a) x[cb + a]`` (one GEMM per head);
* the carry ``h_q(c) = Σ_{c' < c} (λ_q^b)^(c−1−c') s_q(c')``, by :func:`_carry`: chunks in groups of
  ``GROUP``, a dense strictly lower-triangular ``GROUP × GROUP`` matrix inside each group and the
  same carry, recursively, over the groups' end states (decay ``λ^(b·GROUP)``). The first level
  costs ``GROUP·r / b`` multiply-adds per value, each further level ``1/GROUP`` of the one before,
  so the cost per value does not grow with ``n`` (the prototype's dense ``(n/b)²`` carry did: ``(n /
  b²)·r`` per value, 64 at 16,384 tokens with ``b = 64``);
* read out as ``y[cb + a] += Σ_q w_q λ_q^(a+1) h_q(c)`` (one GEMM per head).

An axis no longer than ``b`` is one chunk: the leaf alone, the dense Toeplitz product (on short axes
such as a video's 16 frames the states, ``r`` per chunk, would outnumber the values).

Per value, forward: ``2b`` (leaf, half of it on exact zeros) ``+ 2r`` (state) ``+ 2r`` (read-out)
``+ ≈ 2r·GROUP/b`` (carry) flops, about 200 at ``b = 64, r = 16``. No FFT: every output reads a
later input only through an exact zero of a matrix (the leaf's upper triangle, the carry's strict
upper triangle), so ``y_i`` is bit-for-bit independent of any finite later input and autograd's
backward (the transposed matrices) sends later inputs exactly zero gradient.

:func:`semiseparable_kernel` materialises ``κ`` (h, n): the leaf here, and the O(n²) reference of
the tests. The dispatcher checks the arguments and handles dtypes and autocast;
:func:`torch_mode_product` computes in ``x``'s dtype.

Shape legend:
    h: heads, c: channels per head, n: axis length, r: terms per head, R: every other dimension
    folded (batch, other axes, channels), b: chunk length, C: chunks, G: chunks per group
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# positions per chunk: 64 beat 16, 32 and 128 in every A/B on the shared machine (docs/mixer.md)
CHUNK = 64
GROUP = 16  # chunks per group of the carry
# values of the (h, R, L) tensor per piece of rows (4 MiB in float32), as causal.CHUNK
PIECE = 1 << 20


def semiseparable_kernel(
    log_decays: torch.Tensor, weights: torch.Tensor, length: int
) -> torch.Tensor:
    """``κ[h, k] = Σ_q w[h, q] λ[h, q]^k`` for ``k < length``: (h, n) from ``log λ`` and ``w``, each
    (h, r)."""
    lags = torch.arange(length, device=log_decays.device, dtype=log_decays.dtype)  # (n,)
    return torch.einsum("hq,hqk->hk", weights, torch.exp(log_decays[..., None] * lags))  # (h, n)


def _dense_carry(states: torch.Tensor, log_decay: torch.Tensor) -> torch.Tensor:
    """``h(i) = Σ_{j<i} a^(i−1−j) s(j)`` along the last dim of ``states`` (h, r, R, G), ``a =
    exp(log_decay)`` (h, r).

    One GEMM per head and term, ``(R, G) @ (G, G)``: the terms are a batch dimension, so no
    transpose is needed.
    """
    steps = torch.arange(states.shape[-1], device=states.device)
    gap = (steps[None, :] - steps[:, None] - 1).to(states.dtype)  # (G, G): [j, i] = i − 1 − j
    powers = torch.exp(gap.clamp(min=0) * log_decay[..., None, None])  # (h, r, G, G)
    powers = torch.where(gap >= 0, powers, 0.0)  # exact zeros where j ≥ i
    return torch.matmul(states, powers)  # (h, r, R, G)


def _carry(states: torch.Tensor, log_decay: torch.Tensor, group: int) -> torch.Tensor:
    """:func:`_dense_carry` of ``states`` (h, r, R, C) in levels of ``group`` chunks (module
    docstring).

    ``h(gG + j) = local(g, j) + a^j H(g)``: ``local`` the carry inside group ``g``, ``H`` the carry
    over the groups' end states ``S(g) = a·local(g, G−1) + s(g, G−1)`` with decay ``a^G``.
    """
    heads, terms, rows, count = states.shape
    if count <= group:
        return _dense_carry(states, log_decay)
    groups = -(-count // group)
    # (h, r, R, Cg·G): zero states after the end
    padded = F.pad(states, (0, groups * group - count))
    padded = padded.view(heads, terms, rows * groups, group)  # (h, r, R·Cg, G)
    local = _dense_carry(padded, log_decay)  # (h, r, R·Cg, G)
    ends = torch.exp(log_decay)[..., None] * local[..., -1] + padded[..., -1]  # (h, r, R·Cg): S(g)
    # (h, r, R, Cg): H(g)
    into = _carry(ends.view(heads, terms, rows, groups), group * log_decay, group)
    offsets = torch.arange(group, device=states.device, dtype=states.dtype)  # (G,)
    spread = torch.exp(offsets * log_decay[..., None])  # (h, r, G): a^j
    carried = torch.addcmul(
        local.view(heads, terms, rows, groups, group), spread[:, :, None, None], into[..., None]
    )
    return carried.view(heads, terms, rows, -1)[..., :count]  # (h, r, R, C)


def _scan(
    t: torch.Tensor,
    log_decays: torch.Tensor,
    weights: torch.Tensor,
    chunk: int,
    group: int,
    piece_values: int,
) -> torch.Tensor:
    """``T t`` along the last axis of ``t`` (h, R, L), ``L`` a multiple of ``chunk`` (module
    docstring).

    Rows go through in pieces of about ``piece_values`` values (``split``/``cat``: one node each, so
    the backward gathers the pieces' gradients in one pass), so each piece's intermediates stay in
    cache. The states are kept as (h, r, R·C), the terms ahead of the rows, so that the carry needs
    no transpose; the GEMMs read them, and the chunks, transposed in place.
    """
    heads, rows, length = t.shape
    offsets = torch.arange(chunk, device=t.device, dtype=t.dtype)  # (b,)
    lags = offsets[:, None] - offsets[None, :]  # (b, b): i − j
    kappa = semiseparable_kernel(log_decays, weights, chunk)  # (h, b)
    # (h, b, b): x_block @ leaf
    leaf = torch.where(lags >= 0, kappa[:, lags.clamp(min=0).long()], 0.0).mT
    if length == chunk:  # one chunk (n ≤ b): the leaf is the whole product, no states to carry
        return torch.bmm(t, leaf)
    into_state = torch.exp((chunk - 1 - offsets) * log_decays[..., None])  # (h, r, b): λ^(b−1−a)
    # (h, r, b): w λ^(a+1)
    out_of_state = weights[..., None] * torch.exp((offsets + 1) * log_decays[..., None])
    terms = log_decays.shape[1]
    pieces = []
    for piece in t.split(max(1, piece_values // (heads * length)), dim=1):  # (h, Rp, L)
        blocks = piece.reshape(heads, -1, chunk)  # (h, Rp·C, b): a view
        # (h, r, Rp, C): s_q(c)
        states = torch.bmm(into_state, blocks.mT).view(heads, terms, piece.shape[1], -1)
        # (h, r, Rp·C): h_q(c)
        carried = _carry(states, chunk * log_decays, group).reshape(heads, terms, -1)
        # (h, Rp·C, b): the read-out added in place
        y = torch.bmm(blocks, leaf).baddbmm_(carried.mT, out_of_state)
        pieces.append(y.view(piece.shape))
    return torch.cat(pieces, dim=1) if len(pieces) > 1 else pieces[0]  # (h, R, L)


@dataclass(frozen=True)
class ScanShape:
    """How the chunked scan cuts its work: ``chunk`` positions per chunk, ``group`` chunks per group
    of the carry (≥ 2), and about ``piece`` values of the padded (h, R, L) tensor through the scan
    at a time (whole rows, at least one)."""

    chunk: int = CHUNK
    group: int = GROUP
    piece: int = PIECE

    def __post_init__(self) -> None:
        if self.chunk < 1 or self.group < 2 or self.piece < 1:
            raise ValueError(
                f"chunk={self.chunk}, group={self.group}, piece={self.piece}; expected chunk >= 1, "
                "group >= 2, piece >= 1"
            )


def torch_mode_product(
    x: torch.Tensor,
    log_decays: torch.Tensor,
    weights: torch.Tensor,
    axis: int,
    scan: ScanShape | None = None,
) -> torch.Tensor:
    """:func:`gridmix.mixers.concentration.ops.semiseparable.semiseparable_mode_product` by the
    chunked scan in torch ops (module docstring), cut as ``scan`` says (default
    :class:`ScanShape`), in ``x``'s dtype.

    The form for CUDA, float64, and the double backward of the fused kernel; arguments already
    checked.
    """
    chunk, group, piece = dataclasses.astuple(scan or ScanShape())
    n, heads = x.shape[axis], x.shape[-2]
    b = min(chunk, n)
    length = -(-n // b) * b
    moved = x.movedim(axis, -1).movedim(-3, 0)  # (h, …, c, n): heads first, the axis last
    t = F.pad(moved, (0, length - n)).reshape(heads, -1, length)  # (h, R, L): zeros after the end
    y = _scan(t, log_decays, weights, b, group, piece)  # (h, R, L)
    y = y[..., :n].reshape(moved.shape)  # (h, …, c, n)
    return y.movedim(0, -3).movedim(-1, axis)  # (…, n, …, h, c)
