"""Per-axis factors of the concentration mixer, and the mode products that apply them.

Each grid axis ``k`` of size ``n`` carries one factor, with learned parameters per head ``h``:

* :class:`SymmetricFactor`: ``M_k = U diag(λ) Uᵀ`` with ``U = D_n[:, :m] · Q`` (``D_n`` the
  orthonormal DCT-II basis, ``Q ∈ R^{m×r}`` orthonormal through
  ``torch.nn.utils.parametrizations.orthogonal``) and ``λ = sigmoid(θ) ∈ (0, 1)^r``. Symmetric PSD,
  ``‖M_k‖₂ = max λ < 1``. ``U`` is shared by the heads, ``λ`` is per head.
* :class:`CausalFactor`: lower-triangular Toeplitz ``T[i, j] = κ[i − j]`` with
  ``κ = sigmoid(ρ) · softmax(w)``, so ``‖T‖₂ ≤ ‖κ‖₁ = sigmoid(ρ) < 1``.

The parameter shapes depend on ``m`` (modes, or kernel length), never on ``n``, which is what makes
the same factor valid on any ``n ≥ m`` (resolution transfer). See DESIGN.md section 2.

Shape legend:
    h: heads, n: axis length, m: modes (DCT columns, or causal kernel length), r: rank (≤ m)
    P: product of the dimensions before the contracted axis, S: product of those after it
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrizations


def dct_basis(n: int, m: int, *, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """First ``m`` columns of the orthonormal DCT-II basis of size ``n``: ``(n, m)``, orthonormal columns."""
    assert 1 <= m <= n, f"need 1 <= m <= n, got m={m}, n={n}"
    i = torch.arange(n, dtype=torch.float64, device=device)[:, None]
    k = torch.arange(m, dtype=torch.float64, device=device)[None, :]
    basis = torch.cos(math.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2.0 / n)  # (n, m)
    basis[:, 0] /= math.sqrt(2.0)
    return basis.to(dtype)


def mode_product(x: torch.Tensor, matrix: torch.Tensor, axis: int) -> torch.Tensor:
    """Contract dimension ``axis`` of ``x`` with a shared ``matrix`` (out, in): ``x[.., i, ..] → Σ A[o, i] x``.

    ``x`` is viewed as ``(P, in, S)`` without copying, so the contraction is one batched GEMM.
    """
    shape = x.shape
    x3 = x.reshape(math.prod(shape[:axis]), shape[axis], -1)  # (P, n, S)
    out = torch.matmul(matrix, x3)  # (P, r, S)
    return out.reshape(*shape[:axis], matrix.shape[0], *shape[axis + 1 :])


def mode_product_per_head(x: torch.Tensor, matrices: torch.Tensor, axis: int) -> torch.Tensor:
    """Like :func:`mode_product` with one matrix per head: ``matrices`` (h, out, in), ``x`` (..., h, c)."""
    shape = x.shape  # (B, ..., n, ..., h, c)
    heads, head_dim = shape[-2], shape[-1]
    x5 = x.reshape(math.prod(shape[:axis]), shape[axis], -1, heads, head_dim)  # (P, n, S, h, c)
    out = torch.einsum("hon,pnshc->poshc", matrices, x5)  # (P, o, S, h, c)
    return out.reshape(*shape[:axis], matrices.shape[1], *shape[axis + 1 :])


class SymmetricFactor(nn.Module):
    """``M = U diag(sigmoid(θ_h)) Uᵀ`` on an axis of length ``n`` with ``m`` DCT modes and rank ``r``."""

    def __init__(self, *, length: int, modes: int, rank: int, num_heads: int) -> None:
        super().__init__()
        assert 1 <= rank <= modes <= length, f"need rank <= modes <= length, got {rank}, {modes}, {length}"
        self.length, self.modes, self.rank = length, modes, rank
        rotation = nn.Linear(rank, modes, bias=False)  # weight (m, r): orthonormal columns
        # Householder without trivialization keeps U orthonormal to the precision of whatever dtype runs it.
        parametrizations.orthogonal(rotation, "weight", orthogonal_map="householder", use_trivialization=False)
        with torch.no_grad():
            rotation.weight = torch.eye(modes, rank)  # U starts on the lowest r frequencies
        self.rotation = rotation
        # A low-pass start: λ from sigmoid(2) ≈ 0.88 at the DC mode down to 0.5 at the highest kept mode.
        ramp = torch.linspace(2.0, 0.0, rank) if rank > 1 else torch.full((1,), 2.0)
        self.theta = nn.Parameter(ramp.repeat(num_heads, 1))  # (h, r)

    def basis(self) -> torch.Tensor:
        """``U``: (n, r) with orthonormal columns, in float32 or float64 (whichever the parameters need)."""
        param = self.rotation.parametrizations.weight
        dtype = torch.promote_types(param.original.dtype, torch.float32)  # orgqr has no bf16/fp16 kernel
        rotation = param[0](param.original.to(dtype))  # (m, r)
        # The DCT is rebuilt in the working dtype so U is orthonormal to that dtype's precision.
        return dct_basis(self.length, self.modes, dtype=dtype, device=rotation.device) @ rotation

    def eigenvalues(self) -> torch.Tensor:
        """``λ``: (h, r) in (0, 1)."""
        return torch.sigmoid(self.theta)

    def dense(self) -> torch.Tensor:
        """The factor as dense matrices (h, n, n)."""
        u = self.basis()
        lam = self.eigenvalues()
        return torch.einsum("ir,hr,jr->hij", u, lam.to(u.dtype), u).to(lam.dtype)

    def bound(self) -> torch.Tensor:
        """Certified ``‖M‖₂`` per head (h,): ``max λ``."""
        return self.eigenvalues().amax(dim=-1)

    def prefers_dense(self) -> bool:
        """Dense ``n×n`` costs ``n²`` per column, down-and-up projection ``2·n·r``: dense wins when ``n ≤ 2r``."""
        return self.length <= 2 * self.rank


class CausalFactor(nn.Module):
    """Lower-triangular Toeplitz ``T[i, j] = κ_h[i − j]`` with ``‖κ_h‖₁ = sigmoid(ρ_h) < 1``; kernel length m."""

    def __init__(self, *, length: int, modes: int, num_heads: int) -> None:
        super().__init__()
        assert 1 <= modes <= length, f"need kernel length <= axis length, got {modes}, {length}"
        self.length, self.modes = length, modes
        # Start as a decaying exponential moving average: most weight on the present step.
        self.kernel_logits = nn.Parameter(-0.5 * torch.arange(modes, dtype=torch.float32).repeat(num_heads, 1))
        self.gain_logit = nn.Parameter(torch.full((num_heads,), 2.0))  # (h,)

    def kernel(self) -> torch.Tensor:
        """``κ``: (h, m), non-negative, ``‖κ_h‖₁ = sigmoid(ρ_h)``."""
        return torch.sigmoid(self.gain_logit)[:, None] * torch.softmax(self.kernel_logits, dim=-1)

    def dense(self) -> torch.Tensor:
        """The factor as dense lower-triangular Toeplitz matrices (h, n, n)."""
        kappa = self.kernel()
        lag = torch.arange(self.length, device=kappa.device)
        lag = lag[:, None] - lag[None, :]  # (n, n): i - j
        inside = (lag >= 0) & (lag < self.modes)
        padded = torch.cat([kappa, kappa.new_zeros(kappa.shape[0], 1)], dim=-1)  # index m reads zero
        index = torch.where(inside, lag, torch.full_like(lag, self.modes))
        return padded[:, index]  # (h, n, n)

    def bound(self) -> torch.Tensor:
        """Certified ``‖T‖₂ ≤ ‖κ‖₁`` per head (h,)."""
        return torch.sigmoid(self.gain_logit)
