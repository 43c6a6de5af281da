"""The concentration mixer: a certified-contractive, Kronecker-structured token mixer for N-d grids.

Token mixing is one linear operator per head, a Kronecker product of per-axis factors
``M = M_1 ⊗ … ⊗ M_d`` (:mod:`gridmix.mixers.concentration.factors`): symmetric ``U diag(sigmoid(θ))
Uᵀ`` factors in a DCT (resolution-free) basis, or causal Toeplitz factors on axes that must not see
the future. Every factor has ``‖M_k‖₂ < 1``, so ``‖M‖₂ ≤ Π_k ‖M_k‖₂ < 1``. The operator is never
materialised: it is applied in Tucker form (project each symmetric axis down with a basis shared by
the heads, scale the core per head, expand back), causal axes as per-head Toeplitz factors on the
projected tensor, applied in O(n log² n) and exactly causal
(:mod:`gridmix.mixers.concentration.ops.causal`); with ``causal_form="semiseparable"`` their kernels
are sums of decaying exponentials, applied exactly causally in O(n)
(:mod:`gridmix.mixers.concentration.ops.semiseparable`). As a drop-in for attention the block is ``y
= W_o · M(W_v · x)`` per head. docs/design.md section 2 holds the mathematics; docs/benchmarks.md
the measured speed and what the fast path does.

Prefix tokens (class / register tokens) are not on the grid. With ``prefix_mode="mean"`` (default)
each prefix token's mixed value is ``½ (v_p + mean over the grid of M v)``, so a class token still
sees the whole grid; with ``"identity"`` it is ``v_p`` (passed through ``W_v, W_o`` unmixed).
The whole token map ``T`` (prefix and grid tokens, per head) is therefore not ``M``: its identity
(or ½-identity) block on the prefix tokens has norm 1 (or ½).
:meth:`ConcentrationMixer.spectral_bound` certifies ``‖M‖₂`` (the grid block),
:meth:`ConcentrationMixer.token_map_bound` the whole ``‖T‖₂``.

``spectrum="uncapped"`` is the ablation of the mechanism: eigenvalues ``softplus(θ)`` instead of
``sigmoid(θ)`` (causal kernels without the ``‖κ‖₁ < 1`` cap), the same everything else; such a mixer
has no certificate, and :meth:`ConcentrationMixer.spectral_bound` raises.

Shape legend:
    B: batch, N: grid tokens (n_1·…·n_d), P: prefix tokens, C: channels, h: heads, c = C / h
    grid axes are in row-major order (the last fastest), as timm's token order
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch
from torch import nn

from gridmix.core.grid import Grid
from gridmix.mixers.concentration.factors import (
    STARTS,
    CausalFactor,
    SemiseparableFactor,
    SymmetricFactor,
    symmetric_bases,
)
from gridmix.mixers.concentration.ops.tucker import tucker
from gridmix.mixers.concentration.ops.tucker_native import chain_flops
from gridmix.mixers.contract import token_count_error

PREFIX_MODES = ("mean", "identity")
SPECTRA = ("capped", "uncapped")
CAUSAL_FORMS = ("toeplitz", "semiseparable")
# timm's Block passes these to every attention layer; they have no meaning without queries and keys.
_IGNORED_WHEN_SET = {"qk_norm": False, "scale_norm": False, "attn_drop": 0.0}


def _per_axis(value, grid: Grid, name: str) -> tuple:
    """``value`` once per axis of ``grid``: a scalar (int, str or None) repeated, or a sequence of
    one per axis."""
    if value is None or isinstance(value, (int, str)):
        return (value,) * grid.ndim
    value = tuple(value)
    if len(value) != grid.ndim:
        raise ValueError(
            f"{name}={value!r} has {len(value)} entries; expected one per axis of grid {grid}"
        )
    return value


def check_heads_and_prefix(dim: int, num_heads: int, num_prefix_tokens: int) -> None:
    """``dim`` divisible by ``num_heads`` and ``num_prefix_tokens`` >= 0; ``ValueError``
    otherwise."""
    if dim % num_heads != 0:
        raise ValueError(f"dim={dim} must be divisible by num_heads={num_heads}")
    if num_prefix_tokens < 0:
        raise ValueError(f"num_prefix_tokens={num_prefix_tokens}; expected >= 0")


def add_value_projections(
    module: nn.Module, dim: int, qkv_bias: bool, proj_bias: bool, proj_drop: float, device, dtype
) -> None:
    """``W_v`` (``module.v``), ``W_o`` (``module.proj``) and its dropout on ``module``, then the
    whole module moved to ``device`` and ``dtype`` where given: the last step of a constructor."""
    module.v = nn.Linear(dim, dim, bias=qkv_bias)  # W_v
    module.proj = nn.Linear(dim, dim, bias=proj_bias)  # W_o
    module.proj_drop = nn.Dropout(proj_drop)
    if device is not None or dtype is not None:
        module.to(device=device, dtype=dtype)


class ConcentrationMixer(nn.Module):
    """Drop-in token mixer for a grid; as timm's ``attn_layer`` through the registry
    (:func:`gridmix.mixer_layer`, ``mixer_layer("concentration", grid, rank=8)``).

    Args:
        dim: channels ``C``.
        grid: grid spec, e.g. ``"32x32"`` or ``(8, 16, 16)``.
        num_heads: heads ``h``; ``dim`` must be divisible by it.
        rank: rank ``r_k`` per axis (an int for all axes, or one per axis), capped at the modes.
        modes: DCT modes ``m_k`` per axis (default: the axis length, i.e. unrestricted ``U_k``). For
            a causal axis this is the Toeplitz kernel length. Fewer modes give a band-limited factor
            whose parameters transfer to any axis length ``≥ m_k`` (:meth:`regrid`).
        causal_axes: axes that get a causal Toeplitz factor (negative indices allowed).
        causal_form: how the causal axes' kernels are built: ``"toeplitz"`` (the default:
            :class:`CausalFactor`, ``m`` free numbers per head, applied by the exactly causal
            blocked FFT) or ``"semiseparable"`` (:class:`SemiseparableFactor`: a sum of ``terms``
            decaying exponentials over the whole axis, applied by an exactly causal chunked scan in
            O(n·(b + r)); its kernel spans the axis, so ``modes`` must be left ``None`` on those
            axes). The certificate is the same, ``‖T‖₂ ≤ ‖κ‖₁ < 1``; docs/mixer.md "Causal axes".
        terms: exponentials per head of a semiseparable causal factor (ignored with
            ``causal_form="toeplitz"``).
        num_prefix_tokens: tokens before the grid tokens (class / register tokens).
        prefix_mode: ``"mean"`` or ``"identity"``, see the module docstring.
        spectrum: ``"capped"`` (the idea: every factor's norm below 1) or ``"uncapped"`` (its
            ablation).
        start: where the factors start, ``"lowpass"`` (a local blur), ``"global"`` (near the grid
            mean, as attention's uniform start) or ``"mean"`` (nearer still); one for all axes or
            one per axis (:mod:`gridmix.mixers.concentration.factors`, docs/mixer.md "Where the
            mixer starts").
        qkv_bias, proj_bias, proj_drop: as timm's ``Attention`` (``qkv_bias`` is the bias of
            ``W_v``).
    """

    def __init__(
        self,
        dim: int,
        grid: Grid | str | int | Sequence[int],
        *,
        num_heads: int = 8,
        rank: int | Sequence[int] = 16,
        modes: int | Sequence[int] | None = None,
        causal_axes: Sequence[int] = (),
        num_prefix_tokens: int = 0,
        prefix_mode: str = "mean",
        spectrum: str = "capped",
        start: str | Sequence[str] = "lowpass",
        causal_form: str = "toeplitz",
        terms: int = 16,
        qkv_bias: bool = False,
        proj_bias: bool = True,
        proj_drop: float = 0.0,
        device=None,
        dtype=None,
        **timm_kwargs,
    ) -> None:
        super().__init__()
        self.grid = Grid.parse(grid)
        check_heads_and_prefix(dim, num_heads, num_prefix_tokens)
        if prefix_mode not in PREFIX_MODES:
            raise ValueError(f"prefix_mode={prefix_mode!r}; expected one of {PREFIX_MODES}")
        if spectrum not in SPECTRA:
            raise ValueError(f"spectrum={spectrum!r}; expected one of {SPECTRA}")
        if causal_form not in CAUSAL_FORMS:
            raise ValueError(f"causal_form={causal_form!r}; expected one of {CAUSAL_FORMS}")
        if isinstance(terms, bool) or not isinstance(terms, int) or terms < 1:
            raise ValueError(
                f"terms={terms!r}; expected a positive integer (exponentials per head)"
            )
        capped = spectrum == "capped"
        self._warn_ignored(timm_kwargs)
        d = self.grid.ndim
        causal = set()
        for axis in causal_axes:
            if not -d <= axis < d:
                raise ValueError(
                    f"causal axis {axis} is out of range for the {d}-d grid {self.grid}"
                )
            causal.add(axis % d)
        ranks, mode_counts = (
            _per_axis(rank, self.grid, "rank"),
            _per_axis(modes, self.grid, "modes"),
        )
        starts = _per_axis(start, self.grid, "start")
        if any(s not in STARTS for s in starts):
            raise ValueError(f"start={start!r}; expected one of {STARTS}, or one of them per axis")
        factors = []
        for axis, n in enumerate(self.grid):
            m = n if mode_counts[axis] is None else mode_counts[axis]
            if not 1 <= m <= n:
                raise ValueError(f"modes={m} on axis {axis} must lie in [1, {n}] (the axis length)")
            if axis in causal and causal_form == "semiseparable":
                if mode_counts[axis] not in (None, n):
                    raise ValueError(
                        f"modes={mode_counts[axis]} on semiseparable causal axis {axis}: its "
                        f"kernel spans the whole axis; expected None or {n}"
                    )
                factors.append(
                    SemiseparableFactor(
                        length=n,
                        terms=terms,
                        num_heads=num_heads,
                        capped=capped,
                        start=starts[axis],
                    )
                )
            elif axis in causal:
                factors.append(
                    CausalFactor(
                        length=n, modes=m, num_heads=num_heads, capped=capped, start=starts[axis]
                    )
                )
            else:
                if ranks[axis] is None or ranks[axis] < 1:
                    raise ValueError(
                        f"rank={ranks[axis]!r} on axis {axis}; expected a positive integer"
                    )
                factors.append(
                    SymmetricFactor(
                        length=n,
                        modes=m,
                        rank=min(ranks[axis], m),
                        num_heads=num_heads,
                        capped=capped,
                        start=starts[axis],
                    )
                )
        self.axis_factors = nn.ModuleList(factors)
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        self.num_prefix_tokens, self.prefix_mode, self.spectrum = (
            num_prefix_tokens,
            prefix_mode,
            spectrum,
        )
        self.causal_axes = tuple(sorted(causal))
        self.config = dict(
            num_heads=num_heads,
            rank=rank,
            causal_axes=self.causal_axes,
            causal_form=causal_form,
            terms=terms,
            modes=tuple(f.modes for f in factors),
            num_prefix_tokens=num_prefix_tokens,
            prefix_mode=prefix_mode,
            spectrum=spectrum,
            start=starts,
            qkv_bias=qkv_bias,
            proj_bias=proj_bias,
            proj_drop=proj_drop,
        )
        add_value_projections(self, dim, qkv_bias, proj_bias, proj_drop, device, dtype)

    @staticmethod
    def _warn_ignored(timm_kwargs: dict) -> None:
        timm_kwargs = dict(timm_kwargs)
        timm_kwargs.pop("norm_layer", None)  # only used by qk_norm / scale_norm, warned below
        timm_kwargs.pop("depth", None)  # block index, used by depth-dependent attention inits only
        for name, default in _IGNORED_WHEN_SET.items():
            if name in timm_kwargs and timm_kwargs.pop(name) != default:
                warnings.warn(
                    f"ConcentrationMixer ignores {name} (it has no queries, keys or attention map)",
                    stacklevel=3,
                )
        if timm_kwargs:
            raise TypeError(f"ConcentrationMixer got unexpected arguments {sorted(timm_kwargs)}")

    # ---------------------------------------------------------------- the operator

    def _plan(self) -> tuple[list[int], list[int]]:
        """Axes applied in Tucker form (in projection order, :func:`projection_order`) and the
        causal axes."""
        factors = self.axis_factors
        low_rank = [k for k, f in enumerate(factors) if isinstance(f, SymmetricFactor)]
        dense = [k for k in range(self.grid.ndim) if k not in low_rank]
        order = projection_order(
            [self.grid[k] for k in low_rank], [factors[k].rank for k in low_rank]
        )
        return [low_rank[i] for i in order], dense

    def mix(self, v: torch.Tensor) -> torch.Tensor:
        """Apply the bare operator ``M`` per head: (B, *grid, C) → (B, *grid, C), never
        materialising it.

        Tucker-form axes are projected down (shared bases: one GEMM per mode product, heads and
        channels folded into its columns, :mod:`gridmix.mixers.concentration.ops.tucker`), the
        per-head causal factors act on the smallest tensor
        (:func:`gridmix.mixers.concentration.ops.causal.causal_mode_product`, or the chunked scan of
        :func:`gridmix.mixers.concentration.ops.semiseparable.semiseparable_mode_product` with
        ``causal_form="semiseparable"``), the core is scaled by the per-head eigenvalues, and the
        Tucker axes are expanded back. Mixed precision: the operator is applied in at least float32,
        with autocast off, and the result is cast back to ``v``'s dtype (bf16/fp16 activations, or a
        bf16 module), so the bases, eigenvalues and causal kernels are never rounded.
        """
        if tuple(v.shape[1:-1]) != self.grid.shape or v.shape[-1] != self.dim:
            raise ValueError(
                f"mix expects (B, {', '.join(map(str, self.grid))}, {self.dim}); got "
                f"{tuple(v.shape)}"
            )
        work = torch.promote_types(v.dtype, torch.float32)
        # the float32 / float64 path
        if work == v.dtype and not torch.is_autocast_enabled(v.device.type):
            return self._mix(v)
        with torch.autocast(v.device.type, enabled=False):
            return self._mix(v.to(work)).to(v.dtype)

    def _mix(self, v: torch.Tensor) -> torch.Tensor:
        """:meth:`mix` in ``v``'s dtype (float32 or float64)."""
        x = v.reshape(*v.shape[:-1], self.num_heads, self.head_dim)  # (B, *grid, h, c)
        low_rank, dense = self._plan()
        symmetric = [self.axis_factors[k] for k in low_rank]
        # (n_k, r_k), up to column signs: U diag(λ) Uᵀ does not see them
        bases = [u.to(x.dtype) for u in symmetric_bases(symmetric, signed=False)]
        eigenvalues = [self.axis_factors[k].eigenvalues().to(x.dtype) for k in low_rank]  # (h, r_k)
        axes = [k + 1 for k in low_rank]
        if low_rank and not dense:  # project, scale the core per head, expand: one autograd node
            return tucker(x, bases, axes, eigenvalues=eigenvalues).reshape(v.shape)
        if low_rank:
            # (B, *core, h, c): n_k -> r_k on the Tucker axes
            x = tucker(x, bases, axes, expand=False)
        for k in dense:  # per-head causal factors act on the smallest tensor
            x = self.axis_factors[k].mode_product(x, axis=k + 1)
        if low_rank:
            # scale, then r_k -> n_k
            x = tucker(x, bases, axes, eigenvalues=eigenvalues, project=False)
        return x.reshape(v.shape)

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        """``x``: (B, P + N, C) with P prefix tokens first, then the grid in row-major order."""
        if attn_mask is not None:
            raise ValueError(
                "ConcentrationMixer cannot apply attn_mask: causality is declared with causal_axes"
            )
        if is_causal and not self.causal_axes:
            raise ValueError(
                "is_causal=True but this mixer has no causal_axes; build it with causal_axes=(…)"
            )
        B, T, C = x.shape
        P, N = self.num_prefix_tokens, self.grid.numel
        if T != P + N or C != self.dim:
            raise ValueError(
                token_count_error(tuple(x.shape), prefix=P, grid=self.grid, dim=self.dim)
            )
        v = self.v(x)  # (B, P + N, C)
        mixed = self.mix(v[:, P:].reshape(B, *self.grid, C)).reshape(B, N, C)
        if P:
            prefix = v[:, :P]  # (B, P, C)
            if self.prefix_mode == "mean":
                prefix = 0.5 * (prefix + mixed.mean(dim=1, keepdim=True))
            mixed = torch.cat([prefix, mixed], dim=1)
        return self.proj_drop(self.proj(mixed))

    # ---------------------------------------------------------------- inspection

    def factors(self) -> list[torch.Tensor]:
        """Per axis, the dense factor matrices (h, n_k, n_k)."""
        return [f.dense() for f in self.axis_factors]

    def operator(self) -> torch.Tensor:
        """The dense operator (h, N, N) = kron of the factors, per head. Small grids and tests
        only."""
        if self.grid.numel > 4096:
            raise ValueError(
                f"operator() materialises N×N = {self.grid.numel}² entries; use it on small grids"
            )
        dense = self.factors()
        heads = []
        for h in range(self.num_heads):
            op = dense[0][h]
            for factor in dense[1:]:
                op = torch.kron(op, factor[h])
            heads.append(op)
        return torch.stack(heads)

    def factor_bounds(self) -> torch.Tensor:
        """Upper bounds on ``‖M_k‖₂`` per axis and head: (d, h); below 1 (certified) when
        ``spectrum="capped"``."""
        return torch.stack([f.bound() for f in self.axis_factors])

    def spectral_bound(self) -> torch.Tensor:
        """Certified upper bound on ``‖M‖₂`` per head (h,): ``Π_k ‖M_k‖₂ < 1``.

        It covers the bare grid operator ``M`` only; :meth:`token_map_bound` covers the whole token
        map, prefix tokens included. ``ValueError`` for ``spectrum="uncapped"``: the ablation has no
        certificate.
        """
        if self.spectrum != "capped":
            raise ValueError(
                f"this mixer has spectrum={self.spectrum!r}, the ablation without the eigenvalue "
                "cap: it has no certificate (factor_bounds() still gives each factor's norm)"
            )
        return self.factor_bounds().prod(dim=0)

    def token_map_bound(self) -> torch.Tensor:
        """Certified upper bound on ``‖T‖₂`` per head (h,), ``T`` the whole (P + N)² token map of
        :meth:`forward` before ``W_v`` and ``W_o`` (prefix tokens included). Without prefix tokens
        it is :meth:`spectral_bound`.

        ``"identity"``: ``T = I_P ⊕ M``, so ``‖T‖₂ = max(1, ‖M‖₂) = 1``. ``"mean"``: ``T = [[½ I_P,
        ½ 1_P aᵀ M], [0, M]]`` with ``a = 1_N / N``; splitting ``T`` into its diagonal blocks and
        the corner gives ``‖T‖₂ ≤ max(½, ‖M‖₂) + ½ √P ‖Mᵀ a‖ ≤ max(½, b) + ½ √(P / N) b`` with ``b =
        Π_k ‖M_k‖₂``.
        """
        bound = self.spectral_bound()
        P = self.num_prefix_tokens
        if P == 0:
            return bound
        if self.prefix_mode == "identity":
            return torch.clamp(bound, min=1.0)
        return torch.clamp(bound, min=0.5) + 0.5 * math.sqrt(P / self.grid.numel) * bound

    def regrid(self, grid: Grid | str | int | Sequence[int]) -> ConcentrationMixer:
        """The same learned mixer on another grid (every axis length must be ≥ its modes)."""
        grid = Grid.parse(grid)
        if grid.ndim != self.grid.ndim:
            raise ValueError(
                f"cannot regrid a {self.grid.ndim}-d mixer ({self.grid}) to the {grid.ndim}-d "
                f"grid {grid}"
            )
        for axis, (n, f) in enumerate(zip(grid, self.axis_factors)):
            if f.modes is not None and n < f.modes:
                raise ValueError(
                    f"axis {axis} of {grid} has length {n} < its {f.modes} modes; regrid needs n "
                    ">= modes"
                )
        config = dict(self.config)
        config["rank"] = tuple(getattr(f, "rank", 1) for f in self.axis_factors)
        other = ConcentrationMixer(self.dim, grid, **config)
        other.load_state_dict(self.state_dict())
        ref = next(self.parameters())
        return other.to(device=ref.device, dtype=ref.dtype)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, grid={self.grid}, heads={self.num_heads}, "
            f"causal_axes={self.causal_axes}, prefix={self.num_prefix_tokens} "
            f"({self.prefix_mode}), spectrum={self.spectrum}"
        )


def projection_order(lengths: Sequence[int], ranks: Sequence[int]) -> list[int]:
    """The order of Tucker projections (indices into ``lengths``) with the fewest FLOPs.

    Projecting axis ``k`` down costs ``C·N·r_k·Π ρ_j`` over the axes ``j`` projected before it
    (``ρ_j = r_j / n_j``); swapping two neighbours shows the total is least when the axes go in
    increasing ``r / (1 − ρ)`` (stable, so equal axes keep the outer one first, whose GEMMs are the
    largest). An axis that does not shrink (``r = n``) goes last. The expansion runs in reverse.
    """

    def key(i: int) -> float:
        n, r = lengths[i], ranks[i]
        return math.inf if r >= n else r * n / (n - r)

    return sorted(range(len(lengths)), key=key)


def tucker_flops(grid: Grid | Sequence[int], *, dim: int, rank: int | Sequence[int]) -> int:
    """Minimum multiply-add FLOPs (×2) of one forward ``mix`` in rank-r Tucker form, per batch
    element.

    Projecting axis ``k`` down (``n_k → r_k``) after the axes before it in :func:`projection_order`
    costs ``C · n_k · Π(ranks of the axes done, this one included) · Π(lengths of the axes still to
    do)`` multiply-adds (docs/design.md section 2's cost model, with the contracted length written
    out); expanding back costs the same. The backward pass is twice the forward, so forward+backward
    is 3× this.
    """
    shape = list(Grid.parse(grid).shape)
    ranks = [min(r, n) for r, n in zip(_per_axis(rank, Grid(tuple(shape)), "rank"), shape)]
    order = projection_order(shape, ranks)
    return chain_flops([*shape, dim], order, [ranks[k] for k in order])
