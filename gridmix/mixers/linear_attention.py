"""Linear attention on the tokens of an N-d grid, as timm's ``attn_layer``: softmax replaced by a
feature map.

Follows Katharopoulos et al. 2020, "Transformers are RNNs: Fast Autoregressive Transformers with
Linear Attention". Per head, with ``φ(x) = elu(x) + 1`` on queries and keys,

    out_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ / (φ(q_i)ᵀ Σ_j φ(k_j) + eps)

in O(N c²) per head instead of O(N² c). Multi-head, with the parameters of timm's ``Attention``
(``qkv``, ``q_norm``, ``k_norm``, ``norm``, ``proj``).

**Causal form.** With ``causal_axes=(0,)`` the sums run over the tokens up to ``i`` in row-major
order (prefix sums of ``φ(k_j) v_jᵀ`` and of ``φ(k_j)``), which is exactly causal along the first
grid axis (causal ``"first"``; a token also sees none of the later tokens of its own frame). The
prefix sums are blocked: within a chunk of ``chunk_size`` tokens the masked quadratic form, across
chunks the running state, so memory is O(N·chunk_size + (N / chunk_size) c²) per head rather than
O(N c²). The sums are taken in at least float32 (autocast off), then cast back.

**Prefix tokens** (class / register tokens) are tokens like any other in the non-causal form; with
causal axes they are refused (``ValueError``): a prefix token is on no axis.

Shape legend:
    B: batch, T = P + N tokens (P prefix, N grid), C: channels, h: heads, c = C / h
    G: chunks of L = chunk_size tokens (the causal form)
    grid axes are in row-major order (the last fastest), as timm's token order
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from gridmix.core.grid import GridLike
from gridmix.mixers.contract import taken
from gridmix.mixers.grids import same_rank_copy
from gridmix.mixers.projections import GridAttention


def _feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1 > 0."""
    return F.elu(x) + 1.0  # same shape as x


def _exclusive_cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Σ over the entries before each entry along ``dim`` (the first is zero): no later entry
    enters, exactly."""
    total = x.cumsum(dim).narrow(dim, 0, x.shape[dim] - 1)  # same shape as x, one fewer along dim
    return torch.cat([torch.zeros_like(x.narrow(dim, 0, 1)), total], dim=dim)  # same shape as x


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    eps: float = 1e-6,
    chunk_size: int = 64,
) -> torch.Tensor:
    """Linear attention of ``q, k, v`` (B, h, T, c) → (B, h, T, c), the feature map applied here
    (module docstring); ``causal``: token ``i`` sees the tokens ``j <= i``."""
    fq, fk = _feature_map(q), _feature_map(k)  # (B, h, T, c)
    if not causal:
        state = fk.transpose(-2, -1) @ v  # (B, h, c, c): Σ_j φ(k_j) v_jᵀ
        z = fk.sum(dim=-2, keepdim=True)  # (B, h, 1, c): Σ_j φ(k_j)
        return (fq @ state) / ((fq * z).sum(dim=-1, keepdim=True) + eps)  # (B, h, T, c)
    B, h, T, c = q.shape
    L = min(chunk_size, T)
    G = math.ceil(T / L)
    pad = (
        0,
        0,
        0,
        G * L - T,
    )  # zero tokens after the last: φ(k) = 0 and v = 0 add nothing, and come last
    fq, fk, v = (F.pad(t, pad).reshape(B, h, G, L, c) for t in (fq, fk, v))  # (B, h, G, L, c)
    # (L, L): j <= i inside a chunk
    within = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
    scores = (fq @ fk.transpose(-2, -1)).masked_fill(~within, 0.0)  # (B, h, G, L, L)
    state = _exclusive_cumsum(fk.transpose(-2, -1) @ v, dim=2)  # (B, h, G, c, c): the chunks before
    z = _exclusive_cumsum(fk.sum(dim=-2), dim=2).unsqueeze(-1)  # (B, h, G, c, 1)
    num = scores @ v + fq @ state  # (B, h, G, L, c)
    den = scores.sum(dim=-1, keepdim=True) + fq @ z + eps  # (B, h, G, L, 1)
    return (num / den).reshape(B, h, G * L, c)[:, :, :T]  # (B, h, T, c)


class LinearAttention(GridAttention):
    """Multi-head linear attention over ``P`` prefix tokens and the tokens of ``grid`` (module
    docstring).

    Args:
        dim: channels ``C``, divisible by ``num_heads``.
        grid: the token grid (any rank).
        causal_axes: () or (0,) (the first axis; ``-d`` also names it).
        eps: added to the denominator (> 0).
        chunk_size: tokens per chunk of the causal form's blocked prefix sums (the result does not
            depend on it).
        attention: :class:`~gridmix.mixers.projections.GridAttention`'s: ``num_heads`` (``h``),
            ``num_prefix_tokens`` (``P``; must be 0 with causal axes) and timm's ``Attention``
            projections (``qkv_bias``, ``qk_norm``, ``scale_norm``, ``proj_bias``, ``proj_drop``,
            ``norm_layer``, ``device``, ``dtype``); there is no attention map, so timm's
            ``attn_drop`` is not an argument here (the builder ignores it).
    """

    def __init__(
        self,
        dim: int,
        grid: GridLike,
        *,
        causal_axes: Sequence[int] = (),
        eps: float = 1e-6,
        chunk_size: int = 64,
        **attention,
    ) -> None:
        super().__init__(dim, grid, **attention)
        d = self.grid.ndim
        for axis in causal_axes:
            if (
                isinstance(axis, bool)
                or not isinstance(axis, int)
                or axis % d != 0
                or not -d <= axis < d
            ):
                raise ValueError(
                    f"causal_axes={tuple(causal_axes)!r}; expected () or (0,) (linear attention is "
                    "causal along the first grid axis only)"
                )
        self.causal = bool(causal_axes)
        if self.causal and self.num_prefix_tokens:
            raise ValueError(
                f"num_prefix_tokens={self.num_prefix_tokens} with causal_axes="
                f"{tuple(causal_axes)!r}; expected 0 (causal linear attention takes no prefix "
                "tokens)"
            )
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
            raise ValueError(f"eps={eps!r}; expected a positive number")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size={chunk_size!r}; expected a positive integer")
        self.causal_axes = (0,) if self.causal else ()
        self.eps, self.chunk_size = float(eps), chunk_size

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """:func:`linear_attention` of the heads (B, h, T, c) in at least float32 with autocast off,
        back in ``v``'s dtype: (B, h, T, c)."""
        work = torch.promote_types(v.dtype, torch.float32)
        with torch.autocast(v.device.type, enabled=False):
            out = linear_attention(
                q.to(work),
                k.to(work),
                v.to(work),
                causal=self.causal,
                eps=self.eps,
                chunk_size=self.chunk_size,
            )  # (B, h, T, c)
        return out.to(v.dtype)  # (B, h, T, c)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, grid={self.grid}, heads={self.num_heads}, "
            f"causal_axes={self.causal_axes}, prefix={self.num_prefix_tokens}, eps={self.eps}"
        )


def regrid_linear_attention(module: LinearAttention, grid: GridLike) -> LinearAttention:
    """The same linear attention on another grid of the same rank: a copy with the same parameters
    (none depends on the token count), bit-identical on its own grid."""
    return same_rank_copy(
        module,
        grid,
        LinearAttention,
        caller="regrid_linear_attention",
        expected="a LinearAttention",
        described="linear attention on the {d}-d grid {grid}",
    )


def build_linear_attention(
    dim: int, grid: GridLike, *, num_heads: int, **kwargs
) -> LinearAttention:
    """The mixer builder (:mod:`gridmix.mixers.contract`): :class:`LinearAttention` with the keyword
    arguments it takes (``causal_axes``, ``num_prefix_tokens``, ``eps``, ``chunk_size`` and
    :data:`~gridmix.mixers.projections.PROJECTION_KWARGS`); timm's other keyword arguments
    (``attn_drop``, ``depth`` …) are ignored."""
    return LinearAttention(
        dim, grid, num_heads=num_heads, **taken(kwargs, LinearAttention.keywords())
    )
