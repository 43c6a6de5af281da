"""The mixer's fast path against plain references, in float64: every code path the optimisations
added.

``tests/test_mixer.py`` pins the operator; here each piece behind ``mix`` (the copy-free mode
product and its hand-written backward, the compact-WY backward of the Householder basis, the FFT
form of the DCT, the cost-ordered projections) is checked for values and gradients against autograd
through torch's own ops, so a fast path cannot silently drift from the mathematics.
"""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from gridmix import ConcentrationMixer, dct_basis
from gridmix.mixers.concentration.factors import (
    _DENSE_DCT_MAX,
    CausalFactor,
    _split_constants,
    _wy_inverse_factor,
    dct_columns,
    orthogonal_columns,
    symmetric_bases,
    wy_constants,
)
from gridmix.mixers.concentration.ops.tucker import tucker
from gridmix.mixers.switches import set_native

F64 = dict(rtol=1e-10, atol=1e-10)


def randomised(mixer: ConcentrationMixer) -> ConcentrationMixer:
    """Move every factor parameter off its symmetric initialisation so heads and modes differ.

    The Householder parameters move below the diagonal only: the diagonal holds the column signs ±1,
    which torch's map reads with ``.int()`` and gridmix's with their sign (equal on ±1).
    """
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in mixer.named_parameters():
            if "axis_factors" in name:
                noise = 0.3 * torch.randn_like(p)
                p.add_(noise.tril(-1) if name.endswith("original") else noise)
    return mixer


def reference_mix(mixer: ConcentrationMixer, v: torch.Tensor) -> torch.Tensor:
    """``M v`` with M = kron of per-axis factors built through torch's own ops only (no gridmix fast
    path)."""
    heads = []
    for h in range(mixer.num_heads):
        op = torch.ones(1, 1, dtype=v.dtype)
        for f in mixer.axis_factors:
            if isinstance(f, CausalFactor):
                factor = f.dense()[h]
            else:
                param = f.rotation.parametrizations.weight
                # torch's householder
                u = dct_basis(f.length, f.modes, dtype=v.dtype) @ param[0](param.original)
                factor = u @ torch.diag(f.eigenvalues()[h]) @ u.t()
            op = torch.kron(op, factor)
        heads.append(op)
    b, grid = v.shape[0], mixer.grid
    vh = v.reshape(b, grid.numel, mixer.num_heads, mixer.head_dim)
    return torch.einsum("hij,bjhc->bihc", torch.stack(heads), vh).reshape(v.shape)


@pytest.mark.parametrize(
    "grid,rank,causal",
    [
        ("48", 5, ()),  # 1-D Tucker
        ("30x60", (12, 4), ()),  # projection order differs from axis order (axis 1 first)
        ("160", 3, ()),  # n·m > the dense-DCT limit: the FFT basis
        ("6x20x24", 4, (0,)),  # causal time, Tucker space: middle and last axis products
        ("20x6", 4, ()),  # Tucker axis then a dense per-head axis
        ("10x10", 3, ()),  # equal axes: both bases from one batched Householder call
        ("4x9x9", 3, (0,)),  # two equal Tucker axes behind a causal one
    ],
)
def test_mix_values_and_every_gradient_match_autograd_through_torch_ops(grid, rank, causal):
    mixer = randomised(
        ConcentrationMixer(8, grid, num_heads=2, rank=rank, causal_axes=causal).double()
    )
    v = torch.randn(2, *mixer.grid, 8, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(2, *mixer.grid, 8, dtype=torch.float64)
    params = [v, *mixer.axis_factors.parameters()]
    fast = mixer.mix(v)
    expected = reference_mix(mixer, v)
    torch.testing.assert_close(fast, expected, **F64)
    grads = torch.autograd.grad((fast * weight).sum(), params)
    expected_grads = torch.autograd.grad((expected * weight).sum(), params)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, **F64)


def test_projection_order_minimises_the_tucker_cost():
    # axis 1 shrinks 60 -> 4 (key 4·60/56 ≈ 4.3), axis 0 30 -> 12 (key 12·30/18 = 20): axis 1 goes
    # first
    assert ConcentrationMixer(8, "30x60", num_heads=2, rank=(12, 4))._plan() == ([1, 0], [])
    assert ConcentrationMixer(8, "64x64", num_heads=2, rank=16)._plan() == (
        [0, 1],
        [],
    )  # ties keep axis order
    assert ConcentrationMixer(8, "8x64x64", num_heads=2, rank=16, causal_axes=(0,))._plan() == (
        [1, 2],
        [0],
    )


@pytest.mark.parametrize("m,r", [(5, 1), (6, 2), (7, 3), (20, 5), (64, 16), (40, 17)])
def test_wy_form_equals_lapack_for_exact_reflections(m, r):
    torch.manual_seed(m * r)
    a = torch.randn(m, r, dtype=torch.float64).tril(-1)
    tau = 2.0 / (1.0 + (a * a).sum(0))  # the parametrisation's reflections
    eye, _, half, _ = _split_constants(wy_constants(m, r, dtype=torch.float64), m)
    v = a + eye
    inverse_t = _wy_inverse_factor(v[None], half)[0]  # R = T⁻¹
    t_v1 = torch.linalg.solve_triangular(inverse_t, v[:r].t(), upper=True)
    wy = eye - v @ t_v1  # E − V T V₁ᵀ
    torch.testing.assert_close(wy, torch.linalg.householder_product(a, tau), **F64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_orthogonal_columns_is_the_parametrisation_and_its_gradient(dtype):
    factor = randomised(ConcentrationMixer(8, "24", num_heads=2, rank=6).to(dtype)).axis_factors[0]
    param = factor.rotation.parametrizations.weight
    # the torch-op form (the native kernel is pinned by tests/test_householder_native.py)
    set_native(False)
    try:
        fast, torch_map = orthogonal_columns(factor.rotation)[0], param[0](param.original)
    finally:
        set_native(None)
    # the WY form of torch's orgqr: equal to round-off
    torch.testing.assert_close(
        fast, torch_map, **(F64 if dtype == torch.float64 else dict(rtol=1e-6, atol=1e-6))
    )
    weight = torch.randn_like(fast)
    got = torch.autograd.grad((fast * weight).sum(), param.original)[0]
    want = torch.autograd.grad((torch_map * weight).sum(), param.original)[0]
    tol = F64 if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got, want, **tol)


def test_bases_of_equal_axes_are_batched_and_equal_the_one_by_one_bases():
    mixer = randomised(
        ConcentrationMixer(8, (200, 30, 200), num_heads=2, rank=5, modes=(100, 30, 100)).double()
    )
    # axes 0 and 2 share (length, modes, rank): one batched, FFT-form call
    factors = list(mixer.axis_factors)
    params = [p for f in factors for p in f.rotation.parameters()]
    weights = [torch.randn(f.length, f.rank, dtype=torch.float64) for f in factors]
    batched = symmetric_bases(factors)
    alone = [symmetric_bases([f])[0] for f in factors]
    for got, want in zip(batched, alone):
        torch.testing.assert_close(got, want, **F64)
    got = torch.autograd.grad(sum((u * w).sum() for u, w in zip(batched, weights)), params)
    want = torch.autograd.grad(sum((u * w).sum() for u, w in zip(alone, weights)), params)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **F64)


def test_the_dct_buffer_is_rebuilt_exactly_in_each_dtype():
    factor = ConcentrationMixer(8, "24", num_heads=2, rank=6).axis_factors[0]
    # a constant, not saved
    assert factor.dct.dtype == torch.float32 and "dct" not in factor.state_dict()
    factor.double()
    # not a float32 basis cast up
    assert torch.equal(factor.dct, dct_basis(24, 24, dtype=torch.float64))
    eye = torch.eye(6, dtype=torch.float64)
    torch.testing.assert_close(factor.basis().t() @ factor.basis(), eye, rtol=0, atol=1e-14)
    # orgqr has no bf16 kernel: the basis is built in float32, and so is the DCT
    factor.to(torch.bfloat16)
    assert factor.dct.dtype == torch.float32 and factor.basis().dtype == torch.float32


@pytest.mark.parametrize("n,m", [(200, 200), (300, 90)])
def test_fft_dct_columns_equal_the_dense_basis(n, m):
    assert n * m > _DENSE_DCT_MAX
    q = torch.randn(m, 4, dtype=torch.float64, requires_grad=True)
    dense = dct_basis(n, m, dtype=torch.float64) @ q
    fast = dct_columns(q, n)
    torch.testing.assert_close(fast, dense, **F64)
    weight = torch.randn_like(dense)
    got, want = (torch.autograd.grad((y * weight).sum(), q)[0] for y in (fast, dense))
    torch.testing.assert_close(got, want, **F64)
    assert dct_columns(q.float(), n).dtype == torch.float32


def _mode_products(x, matrices, axes):
    """``x ×_{axes[0]} matrices[0] ×_{axes[1]} …``, one einsum per mode product, through
    autograd."""
    letters = "abcdefgh"[: x.dim()]
    for axis, matrix in zip(axes, matrices):
        x = torch.einsum(
            f"o{letters[axis]},{letters}->{letters.replace(letters[axis], 'o')}", matrix, x
        )
    return x


@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (1, 0), (0, 2, 1)])
@pytest.mark.parametrize("direction", ["project", "expand"])
def test_mode_product_chain_and_its_backward_match_einsum(axes, direction):
    x = torch.randn(5, 6, 7, dtype=torch.float64, requires_grad=True)
    # basis (long, short) per axis
    sizes = dict(project=lambda n: (n, n - 2), expand=lambda n: (n + 3, n))
    bases = [
        torch.randn(*sizes[direction](x.shape[a]), dtype=torch.float64, requires_grad=True)
        for a in axes
    ]
    if direction == "project":  # along axes[0], axes[1], …
        expected = _mode_products(x, [u.t() for u in bases], axes)
    else:  # the expansion runs in the reverse order of the axes
        expected = _mode_products(x, bases[::-1], axes[::-1])
    stages = dict(project=direction == "project", expand=direction == "expand")
    out = tucker(x, bases, axes, **stages)
    torch.testing.assert_close(out, expected, **F64)
    weight = torch.randn_like(out)
    got = torch.autograd.grad((out * weight).sum(), (x, *bases))
    want = torch.autograd.grad((expected * weight).sum(), (x, *bases))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **F64)
    # only the bases need gradients: the input's last GEMM is skipped, the bases' are unchanged
    frozen = tucker(x.detach(), bases, axes, **stages)
    grads = torch.autograd.grad((frozen * weight).sum(), bases)
    for g, w in zip(grads, want[1:]):
        torch.testing.assert_close(g, w, **F64)


@pytest.mark.parametrize("axes", [(1,), (2, 0), (0, 1, 2)])
@pytest.mark.parametrize("stages", ["all", "split"])
def test_scaled_tucker_and_its_gradients_match_per_head_dense_factors(axes, stages):
    # x (4, 5, 6, h=2, c=3); reference: per head, x ×_a U_a diag(λ_a[h]) U_aᵀ on every axis a, by
    # einsum
    x = torch.randn(4, 5, 6, 2, 3, dtype=torch.float64, requires_grad=True)
    bases = [
        torch.randn(x.shape[a], x.shape[a] - 2, dtype=torch.float64, requires_grad=True)
        for a in axes
    ]
    lams = [torch.rand(2, u.shape[1], dtype=torch.float64, requires_grad=True) for u in bases]
    if stages == "all":
        out = tucker(x, bases, axes, eigenvalues=lams)
    else:  # as the mixer with dense axes: project, (dense factors here), then scale and expand
        out = tucker(
            tucker(x, bases, axes, expand=False), bases, axes, eigenvalues=lams, project=False
        )
    heads = []
    for h in range(2):
        factors = [u @ torch.diag(lam[h]) @ u.t() for u, lam in zip(bases, lams)]
        heads.append(_mode_products(x[..., h, :], factors, axes))
    expected = torch.stack(heads, dim=-2)
    torch.testing.assert_close(out, expected, **F64)
    weight = torch.randn_like(out)
    params = (x, *bases, *lams)
    got = torch.autograd.grad((out * weight).sum(), params)
    want = torch.autograd.grad((expected * weight).sum(), params)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **F64)
    # with the eigenvalues frozen, no eigenvalue gradient is formed and the others are unchanged
    frozen = tucker(x, bases, axes, eigenvalues=[lam.detach() for lam in lams])
    for g, w in zip(torch.autograd.grad((frozen * weight).sum(), (x, *bases)), want):
        torch.testing.assert_close(g, w, **F64)


def test_tucker_without_a_stage_is_an_error():
    with pytest.raises(ValueError, match="at least one"):
        tucker(torch.randn(3, 4), [torch.randn(3, 2)], [0], project=False, expand=False)


def test_runs_under_inference_mode_and_fake_tensors_leave_the_real_path_intact():
    mixer = ConcentrationMixer(8, "12x10", num_heads=2, rank=4)
    v = torch.randn(2, 12, 10, 8)
    # as gridmix.analysis.measure's dry runs, before any real call
    with FakeTensorMode(allow_non_fake_inputs=True):
        mixer.mix(torch.randn(2, 12, 10, 8))
    with torch.inference_mode():
        expected = mixer.mix(v)
    out = mixer.mix(v)
    # a basis built under the fake mode must not leak into real calls
    assert type(out) is torch.Tensor
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    assert all(p.grad is not None for p in mixer.axis_factors.parameters())


@pytest.mark.parametrize("n,m", [(1, 1), (6, 6), (9, 4)])
def test_causal_toeplitz_from_sliding_windows_equals_its_definition(n, m):
    factor = CausalFactor(length=n, modes=m, num_heads=2).double()
    with torch.no_grad():
        factor.kernel_logits.add_(torch.randn_like(factor.kernel_logits))
    kappa = factor.kernel()
    expected = torch.zeros(2, n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(max(0, i - m + 1), i + 1):
            expected[:, i, j] = kappa[:, i - j]  # T[i, j] = κ[i − j], zero outside 0 ≤ i − j < m
    assert torch.equal(factor.dense(), expected)
