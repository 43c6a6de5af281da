"""Per-axis factors of the concentration mixer, and the mode products that apply them.

Each grid axis ``k`` of size ``n`` carries one factor, with learned parameters per head ``h``:

* :class:`SymmetricFactor`: ``M_k = U diag(λ) Uᵀ`` with ``U = D_n[:, :m] · Q`` (``D_n`` the
  orthonormal DCT-II basis, ``Q ∈ R^{m×r}`` orthonormal through
  ``torch.nn.utils.parametrizations.orthogonal``) and ``λ = sigmoid(θ) ∈ (0, 1)^r``. Symmetric PSD,
  ``‖M_k‖₂ = max λ < 1``. ``U`` is shared by the heads, ``λ`` is per head.
* :class:`CausalFactor`: lower-triangular Toeplitz ``T[i, j] = κ[i − j]`` with
  ``κ = sigmoid(ρ) · softmax(w)``, so ``‖T‖₂ ≤ ‖κ‖₁ = sigmoid(ρ) < 1``.

The parameter shapes depend on ``m`` (modes, or kernel length), never on ``n``, which is what makes
the same factor valid on any ``n ≥ m`` (resolution transfer). See DESIGN.md section 2;
:mod:`gridmix.tucker` applies the factors to a tensor.

Shape legend:
    h: heads, n: axis length, m: modes (DCT columns, or causal kernel length), r: rank (≤ m)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils import parametrizations

_DENSE_DCT_MAX = 128 * 128  # n·m above which dct_columns uses the FFT (measured crossover on CPU)


def dct_basis(n: int, m: int, *, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """First ``m`` columns of the orthonormal DCT-II basis of size ``n``: ``(n, m)``, orthonormal columns."""
    assert 1 <= m <= n, f"need 1 <= m <= n, got m={m}, n={n}"
    odd = torch.arange(1, 2 * n, 2, dtype=torch.float64, device=device)  # 2i + 1
    k = torch.arange(m, dtype=torch.float64, device=device)
    basis = torch.outer(odd, k).mul_(math.pi / (2 * n)).cos_().mul_(math.sqrt(2.0 / n))  # (n, m)
    basis[:, 0].mul_(math.sqrt(0.5))
    return basis.to(dtype)


def dct_columns(q: torch.Tensor, length: int) -> torch.Tensor:
    """``D_n[:, :m] @ q`` for ``q`` (..., m, r) and ``n = length``: (..., n, r), in ``q``'s dtype.

    Small bases are built and multiplied densely; beyond 128×128 the product is one length-2n FFT per
    column (``D_n[i, k] ∝ Re e^{iπk(2i+1)/2n}``), O(n log n) instead of the O(n·m) basis, which at
    n = m = 16384 would be 2 GiB of float64.
    """
    m = q.shape[-2]
    if length * m <= _DENSE_DCT_MAX:
        # Rebuilt every call (≈50 µs at 64×64): a cached basis would outlive the tracing modes it was
        # built under (a fake-tensor dry run once cached a fake basis, and every later call ran fake).
        return dct_basis(length, m, dtype=q.dtype, device=q.device) @ q
    k = torch.arange(m, dtype=torch.float64, device=q.device)
    twiddle = torch.exp(1j * math.pi * k / (2 * length)) * math.sqrt(2.0 / length)  # (m,) complex128
    twiddle[0] /= math.sqrt(2.0)
    twiddle = twiddle.to(torch.complex128 if q.dtype == torch.float64 else torch.complex64)
    # ifft's 1/(2n) normalisation is undone by the factor 2n; rows n..2n-1 are the mirror image, dropped.
    return torch.fft.ifft(twiddle[:, None] * q, n=2 * length, dim=-2)[..., :length, :].real * (2 * length)


def _wy_factor(v: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """``T`` (..., r, r) of the compact-WY form ``H_1⋯H_r = I − V T Vᵀ`` of reflectors ``H_i = I − τ_i v_i v_iᵀ``.

    ``T⁻¹ = R = diag(1/τ) + striu(VᵀV)`` (Schreiber & Van Loan 1989, Puglisi 1992): one triangular solve.
    """
    r = v.shape[-1]
    inverse = (v.mT @ v).triu_(1)  # (..., r, r)
    inverse.diagonal(dim1=-2, dim2=-1).copy_(tau.reciprocal())
    eye = torch.eye(r, dtype=v.dtype, device=v.device).expand_as(inverse)
    return torch.linalg.solve_triangular(inverse, eye, upper=True)


class _OrthogonalColumns(torch.autograd.Function):
    """Householder map of ``parametrizations.orthogonal`` for tall ``x`` (k, m, r), with a closed-form backward.

    Forward, as torch's map: ``A = tril(x, −1)``, ``τ = 2 / (1 + ‖A_j‖²)`` (exact reflections), ``Q =
    householder_product(A, τ) · diag(signs)`` with LAPACK's ``orgqr``. torch's backward walks the r
    reflectors in many small kernels (≈0.7 ms for a 64×16 basis on a 2-core CPU, per axis and step);
    here the gradient comes from the WY form ``Q = (E − V T V₁ᵀ) S`` (``V = A + E``, ``E = I[:, :r]``,
    ``V₁`` its first r rows, ``T = R⁻¹`` as in :func:`_wy_factor`) in a dozen batched GEMMs:
    ``∂V = −Q̄ V₁ Tᵀ − [Q̄ᵀ V T; 0] + V (R̄ᵤ + R̄ᵤᵀ)`` with ``R̄ = Tᵀ Vᵀ Q̄ V₁ Tᵀ`` (ᵤ: strictly upper),
    and through ``1/τ_j = (1 + ‖A_j‖²) / 2``: ``∂A_ij += R̄_jj A_ij``. The k matrices go through every
    call together, so the per-call cost of these small kernels is paid once for all axes of one shape.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        a = x.tril(diagonal=-1)  # (k, m, r): the reflectors below the unit diagonal
        tau = 2.0 / (1.0 + (a * a).sum(dim=-2))  # (k, r)
        # The diagonal of x holds the column signs ±1 and gets no gradient. torch's map reads it as
        # x.diagonal().int(), which turns 0.9999 into 0: AdamW's decoupled weight decay shrinks that diagonal,
        # and the columns of U would vanish. Reading only its sign keeps U orthonormal under any optimiser.
        signs = torch.where(x.diagonal(dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(x.dtype).unsqueeze(-2)  # (k, 1, r)
        ctx.save_for_backward(a, tau, signs)
        return torch.linalg.householder_product(a, tau).mul_(signs)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        a, tau, signs = ctx.saved_tensors
        r = a.shape[-1]
        v = a + torch.eye(*a.shape[-2:], dtype=a.dtype, device=a.device)  # (k, m, r)
        v1 = v[:, :r]  # (k, r, r)
        t = _wy_factor(v, tau)  # (k, r, r)
        grad = grad * signs  # (k, m, r): Q̄ before the column signs
        vtg = torch.bmm(v.mT, grad)  # (k, r, r): Vᵀ Q̄
        grad_v = torch.bmm(grad, torch.bmm(v1, t.mT)).neg_()  # through V in V T V₁ᵀ
        grad_v[:, :r] -= torch.bmm(vtg.mT, t)  # through V₁
        grad_r = torch.bmm(torch.bmm(t.mT, torch.bmm(vtg, v1)), t.mT)  # ∂L/∂R = −Tᵀ T̄ Tᵀ with T̄ = −Vᵀ Q̄ V₁
        upper = grad_r.triu(1)
        grad_v += torch.bmm(v, upper + upper.mT)  # through striu(VᵀV)
        # through 1/τ = (1 + ‖A_j‖²) / 2 on the diagonal of R
        return grad_v.tril_(-1).addcmul_(a, grad_r.diagonal(dim1=-2, dim2=-1).unsqueeze(-2))


def orthogonal_columns(*rotations: nn.Linear) -> torch.Tensor:
    """The weights of ``rotations`` (each (m, r)) under their ``orthogonal(householder, no trivialization)``
    parametrisation, stacked: (len(rotations), m, r).

    torch's map for a tall weight (column signs read robustly, see :class:`_OrthogonalColumns`),
    computed in at least float32 (``orgqr`` has no bf16/fp16 kernel), with a faster backward. Rotations
    of one shape go through one batched call, which halves the per-step cost of a square grid's bases.
    """
    originals = []
    for rotation in rotations:
        param = rotation.parametrizations.weight
        assert param[0].orthogonal_map.name == "householder" and not hasattr(param[0], "base"), "see SymmetricFactor"
        originals.append(param.original)
    x = torch.stack(originals)  # (k, m, r)
    return _OrthogonalColumns.apply(x.to(torch.promote_types(x.dtype, torch.float32)))


def symmetric_bases(factors: Sequence[SymmetricFactor]) -> list[torch.Tensor]:
    """``[f.basis() for f in factors]``, with factors of equal (length, modes, rank) computed in one batched call."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, f in enumerate(factors):
        groups.setdefault((f.length, f.modes, f.rank), []).append(i)
    bases: list[torch.Tensor | None] = [None] * len(factors)
    for (length, _, _), members in groups.items():
        q = orthogonal_columns(*(factors[i].rotation for i in members))  # (k, m, r)
        for i, basis in zip(members, dct_columns(q, length).unbind()):  # (n, r) each
            bases[i] = basis
    return bases


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
        # The DCT is rebuilt in the working dtype so U is orthonormal to that dtype's precision.
        return symmetric_bases([self])[0]  # (n, r)

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
        """Whether the mixer should apply this factor as dense per-head ``n×n`` matrices: never.

        By FLOPs a dense factor wins when ``n ≤ 2r`` (``n²`` against ``2·n·r`` per column), but it is per
        head, so its GEMMs need the heads as a batch: layout copies of the whole tensor, while the
        Tucker bases are shared by all heads (the per-head ``λ`` scale only the small core). Dense was
        no faster at any benchmark grid (docs/benchmarks.md, "what did not help"), so one path serves all.
        """
        return False


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
        """The factor as dense lower-triangular Toeplitz matrices (h, n, n).

        Built as sliding windows of one padded vector ``u = [0 (n−m), κ reversed, 0 (n−1)]``: window
        ``i'`` is row ``n−1−i'`` of ``T``, so its backward is ``unfold``'s overlap-add, not a scatter
        over n² indices.
        """
        kappa = self.kernel()  # (h, m)
        heads, n, m = kappa.shape[0], self.length, self.modes
        u = torch.cat([kappa.new_zeros(heads, n - m), kappa.flip(-1), kappa.new_zeros(heads, n - 1)], dim=-1)
        return u.unfold(-1, n, 1).flip(-2)  # (h, n, n): [i, j] = u[n−1−i+j] = κ[i−j] for 0 ≤ i−j < m

    def bound(self) -> torch.Tensor:
        """Certified ``‖T‖₂ ≤ ‖κ‖₁`` per head (h,)."""
        return torch.sigmoid(self.gain_logit)
