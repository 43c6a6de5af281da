"""Per-axis factors of the concentration mixer, and the mode products that apply them.

Each grid axis ``k`` of size ``n`` carries one factor, with learned parameters per head ``h``:

* :class:`SymmetricFactor`: ``M_k = U diag(λ) Uᵀ`` with ``U = D_n[:, :m] · Q`` (``D_n`` the
  orthonormal DCT-II basis, ``Q ∈ R^{m×r}`` orthonormal through
  ``torch.nn.utils.parametrizations.orthogonal``) and ``λ = sigmoid(θ) ∈ (0, 1)^r``. Symmetric PSD,
  ``‖M_k‖₂ = max λ < 1``. ``U`` is shared by the heads, ``λ`` is per head.
* :class:`CausalFactor`: lower-triangular Toeplitz ``T[i, j] = κ[i − j]`` with
  ``κ = sigmoid(ρ) · softmax(w)``, so ``‖T‖₂ ≤ ‖κ‖₁ = sigmoid(ρ) < 1``;
  :mod:`gridmix.mixers.concentration.ops.causal` applies it.
* :class:`SemiseparableFactor`: the same causal Toeplitz form with ``κ`` a sum of ``r`` decaying
  exponentials over the whole axis, ``‖κ‖₁ = sigmoid(ρ)`` exactly;
  :mod:`gridmix.mixers.concentration.ops.semiseparable` applies it as a chunked scan.

``start`` sets the factor at step 0: ``"lowpass"`` (a local blur: ``U`` on the lowest ``r`` modes
with ``λ = sigmoid(2 … 0)``; causal kernels ``softmax(−0.5·lag)``, most weight on the present step)
or ``"global"`` (near the averaging operator, as attention's uniform start: ``λ = sigmoid(2)`` on
the DC mode and ``sigmoid(−2)`` on the others; causal kernels flat, a running mean over the whole
kernel) or ``"mean"`` (nearer still: ``sigmoid(4)`` and ``sigmoid(−4)``; causal kernels flat with
the gain ``sigmoid(4)`` instead of ``sigmoid(2)``). On a 32-long axis the lowpass factor carries
about 1e-3 of a token's value 16 steps away, the global one ``0.76 / 32 ≈ 0.024``, the mean one
``0.96 / 32 ≈ 0.030`` (docs/mixer.md, "Where the mixer starts").

``capped=False`` builds the ablation of the mechanism (docs/design.md section 2): the cap map
``sigmoid`` becomes ``softplus`` (eigenvalues, resp. the kernel's ℓ1 norm, in ``(0, ∞)``), started
at the same values as the capped factor, so the two differ in the cap alone. ``bound()`` is then
still the factor's norm (resp. an upper bound on it) but no longer below 1.

The parameter shapes depend on ``m`` (modes, or kernel length), never on ``n``, which is what makes
the same factor valid on any ``n ≥ m`` (resolution transfer). See docs/design.md section 2;
:mod:`gridmix.mixers.concentration.ops.tucker` applies the factors to a tensor.

Shape legend:
    h: heads, n: axis length, m: modes (DCT columns, or causal kernel length), r: rank (≤ m)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils import parametrizations

from gridmix.mixers.concentration.ops import householder_native
from gridmix.mixers.concentration.ops.causal import causal_mode_product, causal_toeplitz
from gridmix.mixers.concentration.ops.semiseparable import (
    semiseparable_kernel,
    semiseparable_mode_product,
)

# n·m above which bases use the FFT form, dct_columns (measured crossover on CPU)
_DENSE_DCT_MAX = 128 * 128


def _at_least_float32(parameter: torch.Tensor) -> torch.Tensor:
    """``parameter`` in float32 if it is stored in a narrower float (bf16 / fp16 modules): the
    certificate's dtype."""
    return parameter.to(torch.promote_types(parameter.dtype, torch.float32))


def dct_basis(n: int, m: int, *, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """First ``m`` columns of the orthonormal DCT-II basis of size ``n``: ``(n, m)``, orthonormal
    columns."""
    assert 1 <= m <= n, f"need 1 <= m <= n, got m={m}, n={n}"
    odd = torch.arange(1, 2 * n, 2, dtype=torch.float64, device=device)  # 2i + 1
    k = torch.arange(m, dtype=torch.float64, device=device)
    basis = torch.outer(odd, k).mul_(math.pi / (2 * n)).cos_().mul_(math.sqrt(2.0 / n))  # (n, m)
    basis[:, 0].mul_(math.sqrt(0.5))
    return basis.to(dtype)


def dct_twiddle(length: int, m: int, *, dtype: torch.dtype = torch.float32, device=None):
    """The weights (m, 2), complex as (real, imaginary) pairs, that :func:`dct_columns` multiplies
    ``q`` by: ``√(2/n) c_k e^{iπk/2n}`` (``c_0 = 1/√2``, else 1) for ``n = length``. Computed in
    float64, returned in ``dtype``'s precision (at least float32)."""
    k = torch.arange(m, dtype=torch.float64, device=device)
    twiddle = torch.exp(1j * math.pi * k / (2 * length)) * math.sqrt(2.0 / length)  # (m,)
    twiddle[0] /= math.sqrt(2.0)
    complex_dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
    return torch.view_as_real(twiddle.to(complex_dtype))  # (m, 2)


def dct_columns(q: torch.Tensor, length: int, twiddle: torch.Tensor | None = None) -> torch.Tensor:
    """``D_n[:, :m] @ q`` for ``q`` (..., m, r) and ``n = length`` by FFT: (..., n, r), in ``q``'s
    dtype.

    One length-2n FFT per column (``D_n[i, k] ∝ Re e^{iπk(2i+1)/2n}``), O(n log n) instead of the
    O(n·m) dense basis, which at n = m = 16384 would be 2 GiB of float64. :func:`symmetric_bases`
    uses it beyond 128×128, with the factor's cached ``twiddle`` (:func:`dct_twiddle`, built here
    when not given); below that the dense product is faster on CPU.
    """
    if twiddle is None:
        twiddle = dct_twiddle(length, q.shape[-2], dtype=q.dtype, device=q.device)
    spectrum = torch.view_as_complex(twiddle)[:, None] * q  # (..., m, r)
    # ifft's 1/(2n) normalisation is undone by the factor 2n; rows n..2n-1 are the mirror image,
    # dropped.
    return torch.fft.ifft(spectrum, n=2 * length, dim=-2)[..., :length, :].real * (2 * length)


def wy_constants(
    m: int, r: int, *, dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """The constants of :class:`_OrthogonalColumns` for (m, r) weights, stacked as (2m + r + 2, r)
    (:func:`_split_constants`): ``E = I[:, :r]``; the strictly lower mask; the (r, r) mask that
    keeps the strict upper part of ``VᵀV`` and halves its diagonal; the rows ``+1`` and ``−1``."""
    eye = torch.eye(m, r, dtype=torch.float64)
    lower = torch.ones(m, r, dtype=torch.float64).tril(-1)
    half = torch.ones(r, r, dtype=torch.float64).triu(1) + 0.5 * torch.eye(r, dtype=torch.float64)
    signs = torch.tensor([[1.0], [-1.0]], dtype=torch.float64).expand(2, r)
    return torch.cat([eye, lower, half, signs]).to(dtype=dtype, device=device)


def _split_constants(constants: torch.Tensor, m: int) -> tuple[torch.Tensor, ...]:
    """``E`` (m, r), the lower mask (m, r), the halving mask (r, r), ``±1`` (2, r): views of
    :func:`wy_constants`."""
    r = constants.shape[-1]
    return constants.split([m, m, r, 2])


def _wy_inverse_factor(v: torch.Tensor, half: torch.Tensor) -> torch.Tensor:
    """``R = T⁻¹`` (k, r, r), upper triangular, of the compact-WY form ``H_1⋯H_r = I − V T Vᵀ`` of
    the exact reflectors ``H_i = I − τ_i v_i v_iᵀ``, ``τ_i = 2 / ‖v_i‖²``, of ``V`` (k, m, r) with a
    unit diagonal.

    ``R = diag(1/τ) + striu(VᵀV)`` (Schreiber & Van Loan 1989, Puglisi 1992) and ``1/τ_j =
    (VᵀV)_jj / 2``, so ``R = VᵀV ⊙ half`` (``half`` from :func:`wy_constants`).
    """
    return torch.bmm(v.mT, v).mul_(half)  # (k, r, r)


class _OrthogonalColumns(torch.autograd.Function):
    """Householder map of ``parametrizations.orthogonal`` for k tall weights (m, r), then ``D ·``
    (optional), in the compact-WY form.

    torch's map is ``A = tril(x, −1)``, ``τ = 2 / (1 + ‖A_j‖²)`` (exact reflections), ``Q =
    householder_product(A, τ) · diag(signs)``; with a DCT ``D`` (n, m) each output is ``D Q`` (n,
    r). Here the same ``Q`` (to float round-off) comes from the WY form ``Q = (E − V X) S`` (``V = A
    + E``, ``E = I[:, :r]``, ``X = T V₁ᵀ`` from one triangular solve against ``R = T⁻¹``
    (:func:`_wy_inverse_factor`), ``V₁`` the first r rows of ``V``, ``S`` the signs), and ``D Q =
    D E − (D V) X``. With ``A = Dᵀ Ū S`` (``Q̄``), ``Y = Vᵀ A`` and ``Z = R⁻ᵀ Y`` (a second solve)
    the backward is ``∂V = V (P + Pᵀ) − A Xᵀ − E Zᵀ`` with ``P = (Z Xᵀ) ⊙ half`` (through ``R``,
    whose diagonal ``(VᵀV)_jj / 2`` carries ``1/τ_j``), masked to the strictly lower part (the free
    parameters). One node for the whole basis, each step a single batched op for the k weights
    together (torch's own backward walks the r reflectors in many small kernels, and LAPACK's
    ``orgqr`` on a GPU runs matrix by matrix): 7 ops forward and 11 backward whatever k and r.
    ``constants`` is :func:`wy_constants` in the weights' dtype and device. ``signed=False`` leaves
    the column signs ``S`` out (:func:`symmetric_bases`).
    """

    @staticmethod
    def forward(
        ctx,
        dct: torch.Tensor | None,
        constants: torch.Tensor,
        signed: bool,
        *weights: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        x = torch.stack(weights)  # (k, m, r)
        k, m, r = x.shape
        eye, lower, half, unit = _split_constants(constants, m)
        v = torch.addcmul(eye, x, lower)  # (k, m, r): V = tril(x, −1) + E, the reflectors
        inverse_t = _wy_inverse_factor(v, half)  # (k, r, r): R = T⁻¹
        # (k, r, r): X = T V₁ᵀ
        t_v1 = torch.linalg.solve_triangular(inverse_t, v[:, :r].mT, upper=True)
        if dct is None:
            q = torch.baddbmm(eye, v, t_v1, alpha=-1)  # (k, m, r): E − V X
        else:  # (k, n, r): D E − (D V) X
            q = torch.baddbmm(dct[:, :r], torch.bmm(dct.expand(k, -1, -1), v), t_v1, alpha=-1)
        # The diagonal of x holds the column signs ±1 and gets no gradient. torch's map reads it as
        # x.diagonal().int(), which turns 0.9999 into 0: AdamW's decoupled weight decay shrinks that
        # diagonal, and the columns of U would vanish. Reading only its sign keeps U orthonormal
        # under any optimiser.
        signs = None
        if signed:
            # (k, 1, r)
            signs = torch.where(x.diagonal(dim1=-2, dim2=-1).unsqueeze(-2) < 0, unit[1], unit[0])
            q.mul_(signs)
        ctx.save_for_backward(v, inverse_t, t_v1, signs, dct, constants)
        return q.unbind()  # (m or n, r) each

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads: torch.Tensor):
        # torch.compile traces backwards under the caller's autocast; this one must stay in the
        # forward's dtype
        with torch.autocast(grads[0].device.type, enabled=False):
            return _OrthogonalColumns._backward(ctx, *grads)

    @staticmethod
    def _backward(ctx, *grads: torch.Tensor):
        v, inverse_t, t_v1, signs, dct, constants = ctx.saved_tensors
        k, m, r = v.shape
        _, lower, half, _ = _split_constants(constants, m)
        grad = torch.stack(grads)  # (k, n or m, r)
        if signs is not None:
            grad = grad.mul_(signs)  # (k, n or m, r): before the column signs
        if dct is not None:
            grad = torch.bmm(dct.t().expand(k, -1, -1), grad)  # (k, m, r): A = Q̄ = Dᵀ Ū
        # (k, r, r): Z = R⁻ᵀ Vᵀ A; through X = R⁻¹ V₁ᵀ, ∂V₁ᵀ = −Z and ∂R = Z Xᵀ
        z = torch.linalg.solve_triangular(inverse_t.mT, torch.bmm(v.mT, grad), upper=False)
        # (k, r, r): P, the part of ∂R that reaches VᵀV (its upper triangle, the diagonal halved)
        p = torch.bmm(z, t_v1.mT).mul_(half)
        # The gradient of V is built transposed, (k, r, m): parametrizations store the weights
        # column-major, and a gradient in its weight's layout is not copied by autograd.
        # (k, r, m): through VᵀV, and through V in E − V X (−X Aᵀ)
        grad_v_t = torch.baddbmm(torch.bmm(p + p.mT, v.mT), t_v1, grad.mT, alpha=-1)
        grad_v_t[:, :, :r].sub_(z)  # through V₁ᵀ in X
        grad_x = grad_v_t.mul_(lower.mT).mT  # (k, m, r), column-major: only the strictly lower part
        return None, None, None, *grad_x.unbind()


def orthogonal_columns(
    *rotations: nn.Linear,
    dct: torch.Tensor | None = None,
    constants: torch.Tensor | None = None,
    signed: bool = True,
) -> tuple[torch.Tensor, ...]:
    """The weights of ``rotations`` (each (m, r)) under their ``orthogonal(householder, no
    trivialization)`` parametrisation (checked when :class:`SymmetricFactor` registers it), each (m,
    r); or ``dct @`` them.

    torch's map for a tall weight (column signs read robustly, see :class:`_OrthogonalColumns`),
    computed in at least float32 (as torch's: ``orgqr`` has no bf16/fp16 kernel), with a faster
    backward; in float32 on the CPU, the native kernel computes it
    (:mod:`gridmix.mixers.concentration.ops.householder_native`). Rotations of one shape go through
    one batched call, which halves the per-step cost of a square grid's bases. ``dct`` (n, m) and
    ``constants`` (:func:`wy_constants`, built here when not given) must already be in that dtype.
    ``signed=False``: the torch-op path leaves the column signs out (:func:`symmetric_bases`).
    """
    originals = [rotation.parametrizations.weight.original for rotation in rotations]
    dtype = torch.promote_types(originals[0].dtype, torch.float32)
    weights = tuple(w.to(dtype) for w in originals)
    # the C kernel (ops/householder_native.py), same function
    if householder_native.native_applies(dct, weights):
        return householder_native.NativeOrthogonalColumns.apply(dct, *weights)
    if constants is None:
        constants = wy_constants(*weights[0].shape, dtype=dtype, device=weights[0].device)
    return _OrthogonalColumns.apply(dct, constants, signed, *weights)


def symmetric_bases(
    factors: Sequence[SymmetricFactor], *, signed: bool = True
) -> list[torch.Tensor]:
    """``[f.basis() for f in factors]``, with factors of equal (length, modes, rank) computed in one
    batched call.

    ``signed=False`` may leave out the column signs ``S = diag(±1)`` of torch's map: each basis is
    then ``U`` or ``U S``, which give the same factor ``U diag(λ) Uᵀ`` bit for bit (``S`` commutes
    with ``diag(λ)``, ``S² = I``, and a sign flip rounds nothing), so the mixer's Tucker chain
    asks for it; the torch-op path then saves three ops forward and one backward, the native kernel
    keeps its signs.

    ``U = D_n[:, :m] Q``: the dense DCT (the factor's buffer) inside the Householder node up to
    128×128, the FFT form (:func:`dct_columns`) beyond; the node's constants are the factor's buffer
    too.
    """
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, f in enumerate(factors):
        groups.setdefault((f.length, f.modes, f.rank), []).append(i)
    bases: list[torch.Tensor | None] = [None] * len(factors)
    for (length, _, _), members in groups.items():
        rotations = [factors[i].rotation for i in members]
        buffers = factors[members[0]].working_buffers()
        # (n, r) each, or (m, r) without a dense DCT
        group = orthogonal_columns(
            *rotations, dct=buffers["dct"], constants=buffers["wy"], signed=signed
        )
        if buffers["dct"] is None:
            # (n, r) each
            group = dct_columns(torch.stack(group), length, buffers["twiddle"]).unbind()
        for i, basis in zip(members, group):
            bases[i] = basis
    return bases


STARTS = ("lowpass", "global", "mean")
# Each start's leading logit: the DC eigenvalue (lowpass ramps from it down to 0, the averaging
# starts put every other mode at its negative) and the causal gain.
START_LOGIT = {"lowpass": 2.0, "global": 2.0, "mean": 4.0}


def _cap(logits: torch.Tensor, capped: bool) -> torch.Tensor:
    """``sigmoid`` (values in (0, 1): the certificate) or, for the ablation, ``softplus`` (values in
    (0, ∞))."""
    return torch.sigmoid(logits) if capped else F.softplus(logits)


def _uncap_logits(logits: torch.Tensor) -> torch.Tensor:
    """Logits ``x`` with ``softplus(x) = sigmoid(logits)``: the ablation starts where the capped
    factor does."""
    return torch.log(torch.expm1(torch.sigmoid(logits)))


class SymmetricFactor(nn.Module):
    """``M = U diag(sigmoid(θ_h)) Uᵀ`` on an axis of length ``n`` with ``m`` DCT modes and rank
    ``r``.

    ``capped=False``: ``softplus(θ_h)`` instead of ``sigmoid(θ_h)`` (the ablation; see the module
    docstring).
    """

    def __init__(
        self,
        *,
        length: int,
        modes: int,
        rank: int,
        num_heads: int,
        capped: bool = True,
        start: str = "lowpass",
    ) -> None:
        super().__init__()
        assert 1 <= rank <= modes <= length, (
            f"need rank <= modes <= length, got {rank}, {modes}, {length}"
        )
        assert start in STARTS, f"start={start!r}; expected one of {STARTS}"
        self.length, self.modes, self.rank, self.capped = length, modes, rank, capped
        rotation = nn.Linear(rank, modes, bias=False)  # weight (m, r): orthonormal columns
        # Householder without trivialization keeps U orthonormal to the precision of whatever dtype
        # runs it.
        parametrizations.orthogonal(
            rotation, "weight", orthogonal_map="householder", use_trivialization=False
        )
        # what orthogonal_columns reimplements, with its backward
        householder = rotation.parametrizations.weight[0]
        assert householder.orthogonal_map.name == "householder" and not hasattr(householder, "base")
        with torch.no_grad():
            rotation.weight = torch.eye(modes, rank)  # U starts on the lowest r frequencies
        self.rotation = rotation
        # Constants, so not saved, rebuilt by _apply in the dtype the basis is computed in (the DCT
        # so it stays orthonormal): D_n[:, :m] for the dense product inside the Householder node, or
        # the twiddle weights of the FFT form beyond _DENSE_DCT_MAX; the node's masks.
        self.dense_dct = length * modes <= _DENSE_DCT_MAX
        for name, buffer in self._build_buffers(torch.float32, None).items():
            self.register_buffer(name, buffer, persistent=False)
        logit = START_LOGIT[start]
        # λ from sigmoid(2) ≈ 0.88 at the DC mode down to 0.5 at the highest kept mode
        if start == "lowpass":
            ramp = torch.linspace(logit, 0.0, rank) if rank > 1 else torch.full((1,), logit)
        # the DC mode (the grid mean) at sigmoid(L), every other mode at sigmoid(-L): L = 2
        # (global), 4 (mean)
        else:
            ramp = torch.cat([torch.full((1,), logit), torch.full((rank - 1,), -logit)])
        # (h, r)
        self.theta = nn.Parameter((ramp if capped else _uncap_logits(ramp)).repeat(num_heads, 1))

    def _build_buffers(self, dtype: torch.dtype, device) -> dict[str, torch.Tensor | None]:
        """``dct`` (n, m) or ``twiddle`` (m, 2) (:func:`dct_twiddle`), the other None, and ``wy``
        (:func:`wy_constants`), built in ``dtype`` promoted to at least float32 (the basis's
        dtype)."""
        dtype = torch.promote_types(dtype, torch.float32)
        n, m = self.length, self.modes
        return dict(
            dct=dct_basis(n, m, dtype=dtype, device=device) if self.dense_dct else None,
            twiddle=None if self.dense_dct else dct_twiddle(n, m, dtype=dtype, device=device),
            wy=wy_constants(m, self.rank, dtype=dtype, device=device),
        )

    def _apply(self, fn, recurse: bool = True):
        super()._apply(fn, recurse)
        # rebuilt, not cast: a float32 DCT cast to float64 is orthonormal to 1e-7 only
        for name, buffer in self._build_buffers(self.wy.dtype, self.wy.device).items():
            setattr(self, name, buffer)
        return self

    def working_buffers(self) -> dict[str, torch.Tensor | None]:
        """``dct``, ``twiddle`` and ``wy`` (:meth:`_build_buffers`) in the dtype and device of this
        factor's basis (built anew only if the rotation was converted on its own)."""
        weight = self.rotation.parametrizations.weight.original
        dtype, device = torch.promote_types(weight.dtype, torch.float32), weight.device
        if self.wy.dtype == dtype and self.wy.device == device:
            return dict(dct=self.dct, twiddle=self.twiddle, wy=self.wy)
        return self._build_buffers(dtype, device)

    def basis(self) -> torch.Tensor:
        """``U``: (n, r) with orthonormal columns, in float32 or float64 (whichever the parameters
        need)."""
        return symmetric_bases([self])[0]  # (n, r)

    def eigenvalues(self) -> torch.Tensor:
        """``λ``: (h, r) in (0, 1) (in (0, ∞) when uncapped), in at least float32 (a bf16 sigmoid
        would round values near 1 up to 1)."""
        return _cap(_at_least_float32(self.theta), self.capped)

    def dense(self) -> torch.Tensor:
        """The factor as dense matrices (h, n, n)."""
        u = self.basis()
        lam = self.eigenvalues()
        return torch.einsum("ir,hr,jr->hij", u, lam.to(u.dtype), u).to(lam.dtype)

    def bound(self) -> torch.Tensor:
        """``‖M‖₂`` per head (h,): ``max λ`` (below 1 only when capped)."""
        return self.eigenvalues().amax(dim=-1)


class _CausalToeplitzFactor(nn.Module):
    """What the causal factors share: a lower-triangular Toeplitz ``T[i, j] = κ_h[i − j]`` on an
    axis of ``length``, whose kernel (:meth:`kernel`, the subclass's) has ``‖κ_h‖₁`` = the gain
    ``sigmoid(ρ_h)`` (``softplus(ρ_h)`` when uncapped), started at ``start``'s logit; the dense form
    and the bound follow from them."""

    def __init__(
        self, *, length: int, num_heads: int, capped: bool = True, start: str = "lowpass"
    ) -> None:
        super().__init__()
        assert start in STARTS, f"start={start!r}; expected one of {STARTS}"
        self.length, self.num_heads, self.capped, self.start = length, num_heads, capped, start

    def _start_gain(self) -> nn.Parameter:
        """``ρ`` (h,) at the start: ``sigmoid(ρ)`` ≈ 0.88 (0.98 for ``"mean"``), or the logit whose
        ``softplus`` is that when uncapped."""
        gain = torch.full((self.num_heads,), START_LOGIT[self.start])
        return nn.Parameter(gain if self.capped else _uncap_logits(gain))

    def gain(self) -> torch.Tensor:
        """``‖κ_h‖₁`` per head (h,), in at least float32."""
        return _cap(_at_least_float32(self.gain_logit), self.capped)

    def dense(self) -> torch.Tensor:
        """The factor as dense lower-triangular Toeplitz matrices (h, n, n) of the subclass's
        ``kernel()`` (the mixer applies it in a fast, exactly causal form instead:
        ``mode_product``)."""
        return causal_toeplitz(self.kernel(), self.length)

    def bound(self) -> torch.Tensor:
        """``‖T‖₂ ≤ ‖κ‖₁`` per head (h,) (below 1 only when capped), in at least float32."""
        return self.gain()


class CausalFactor(_CausalToeplitzFactor):
    """Lower-triangular Toeplitz ``T[i, j] = κ_h[i − j]`` with ``‖κ_h‖₁ = sigmoid(ρ_h) < 1``; kernel
    length m."""

    def __init__(self, *, length: int, modes: int, **common) -> None:
        """``common``: ``num_heads``, ``capped`` and ``start`` (:class:`_CausalToeplitzFactor`)."""
        super().__init__(length=length, **common)
        assert 1 <= modes <= length, f"need kernel length <= axis length, got {modes}, {length}"
        self.modes = modes
        # lowpass: a decaying exponential moving average, most weight on the present step; global: a
        # flat kernel.
        decay = 0.5 if self.start == "lowpass" else 0.0
        self.kernel_logits = nn.Parameter(
            -decay * torch.arange(modes, dtype=torch.float32).repeat(self.num_heads, 1)
        )
        self.gain_logit = self._start_gain()  # (h,)

    def kernel(self) -> torch.Tensor:
        """``κ``: (h, m), non-negative, ``‖κ_h‖₁ = sigmoid(ρ_h)`` (``softplus(ρ_h)``, unbounded,
        when uncapped); in at least float32."""
        return self.gain()[:, None] * torch.softmax(_at_least_float32(self.kernel_logits), dim=-1)

    def mode_product(self, x: torch.Tensor, axis: int) -> torch.Tensor:
        """``T`` applied along ``axis`` of ``x`` (…, n, …, h, c) by the exactly causal blocked FFT
        (:func:`gridmix.mixers.concentration.ops.causal.causal_mode_product`)."""
        return causal_mode_product(x, self.kernel(), axis)


class SemiseparableFactor(_CausalToeplitzFactor):
    """Causal Toeplitz ``T[i, j] = κ_h[i − j]`` with ``κ_h[k] = Σ_q w_hq λ_hq^k`` over the whole
    axis, ``r`` terms.

    ``λ = sigmoid(z_h)`` (decays in (0, 1)) and ``w_hq = g_h · softmax(a_h)_q · (1 − λ_hq) / (1 −
    λ_hq^n)``, so that ``‖κ_h‖₁ = Σ_q w_hq (1 − λ_hq^n) / (1 − λ_hq) = g_h`` exactly, with ``g_h =
    sigmoid(ρ_h) < 1`` (the certificate ``‖T‖₂ ≤ ‖κ‖₁``, as :class:`CausalFactor`) or
    ``softplus(ρ_h)`` when uncapped (the ablation). The parameters are ``2r + 1`` numbers per head
    whatever ``n`` (the kernel is renormalised to each axis length: the same factor serves any
    ``n``); :func:`gridmix.mixers.concentration.ops.semiseparable.semiseparable_mode_product`
    applies it in O(n·(b + r)) without materialising ``κ``.

    Starts: the terms' time constants ``τ_q`` (``λ_q = e^(−1/τ_q)``) are spread log-evenly, equal
    mixture logits ``a = 0``. ``"lowpass"``: ``τ`` from 1/2 to 8 steps, a decaying kernel with most
    weight on the last steps (κ at lags 1, 4 and 40 is 0.43, 0.10 and 2e-4 of κ at lag 0);
    ``"global"``: ``τ`` from ``2n`` to ``32n``, a near-flat kernel (its last lag weighs 0.84 of its
    first at any ``n``), about a running mean over the whole axis. Distinct ``τ`` keep the terms
    from being interchangeable (equal terms would get equal gradients forever).
    """

    def __init__(self, *, length: int, terms: int, **common) -> None:
        """``common``: ``num_heads``, ``capped`` and ``start`` (:class:`_CausalToeplitzFactor`)."""
        super().__init__(length=length, **common)
        assert length >= 1 and terms >= 1, f"need length >= 1 and terms >= 1, got {length}, {terms}"
        self.terms = terms
        self.modes = None  # no modes: the kernel spans whatever axis length it is applied to
        low, high = (0.5, 8.0) if self.start == "lowpass" else (2.0 * length, 32.0 * length)
        # (r,): τ_q
        timescales = torch.logspace(math.log10(low), math.log10(high), terms, dtype=torch.float64)
        decay_logits = -torch.log(torch.expm1(1.0 / timescales))  # sigmoid(z) = e^(−1/τ)
        heads = self.num_heads
        self.decay_logits = nn.Parameter(decay_logits.float().repeat(heads, 1))  # (h, r)
        self.weight_logits = nn.Parameter(torch.zeros(heads, terms))  # (h, r)
        self.gain_logit = self._start_gain()  # (h,)

    def log_decays(self) -> torch.Tensor:
        """``log λ``: (h, r), negative, in at least float32 (``logsigmoid``: exact where ``λ``
        rounds to 1)."""
        return F.logsigmoid(_at_least_float32(self.decay_logits))

    def weights(self) -> torch.Tensor:
        """``w``: (h, r), ``Σ_q w_q Σ_{k<n} λ_q^k = gain`` for this factor's ``n``; in at least
        float32."""
        logits = _at_least_float32(self.decay_logits)
        # (h, r): Σ_{k<n} λ^k
        mass = -torch.expm1(self.length * F.logsigmoid(logits)) / torch.sigmoid(-logits)
        return (
            self.gain()[:, None]
            * torch.softmax(_at_least_float32(self.weight_logits), dim=-1)
            / mass
        )

    def kernel(self) -> torch.Tensor:
        """``κ``: (h, n) materialised, non-negative, ``‖κ_h‖₁`` = the gain (the reference and the
        certificate)."""
        return semiseparable_kernel(self.log_decays(), self.weights(), self.length)

    def mode_product(self, x: torch.Tensor, axis: int) -> torch.Tensor:
        """``T`` applied along ``axis`` of ``x`` (…, n, …, h, c) by the chunked scan, exactly
        causal."""
        return semiseparable_mode_product(x, self.log_decays(), self.weights(), axis)
