"""The mathematics of the concentration mixer (docs/design.md section 2), pinned in float64."""

import math

import pytest
import torch

from gridmix import ConcentrationMixer, dct_basis, tucker_flops
from gridmix.mixers.concentration.layer import projection_order

CASES = [
    ("16", (), 4),  # 1-D, low-rank path
    ("6x5", (), 2),  # 2-D non-square, dense path (n <= 2r)
    ("12x7", (0,), 3),  # causal + symmetric
    ("4x9x5", (0,), 2),  # video-like: causal time, symmetric space
    ("3x4x2x5", (1, 3), 2),  # 4-D, two causal axes
]


def make(grid, causal=(), rank=2, heads=2, dim=8, **kw):
    torch.manual_seed(0)
    mixer = ConcentrationMixer(
        dim, grid, num_heads=heads, rank=rank, causal_axes=causal, **kw
    ).double()
    with torch.no_grad():  # move away from the symmetric initialisation so heads and modes differ
        for name, p in mixer.named_parameters():
            if "axis_factors" in name and "original" not in name:
                p.add_(torch.randn_like(p))
    return mixer


def reference_operator(mixer):
    """kron of the dense factors, built independently of ``operator()``."""
    factors = mixer.factors()
    ops = []
    for h in range(mixer.num_heads):
        op = torch.ones(1, 1, dtype=torch.float64)
        for f in factors:
            op = torch.kron(op, f[h])
        ops.append(op)
    return torch.stack(ops)


@pytest.mark.parametrize("grid,causal,rank", CASES)
def test_mix_equals_dense_kronecker_operator(grid, causal, rank):
    mixer = make(grid, causal, rank)
    v = torch.randn(3, *mixer.grid, mixer.dim, dtype=torch.float64)
    op = reference_operator(mixer)  # (h, N, N)
    vh = v.reshape(3, mixer.grid.numel, mixer.num_heads, mixer.head_dim)
    expected = torch.einsum("hij,bjhc->bihc", op, vh).reshape(v.shape)
    torch.testing.assert_close(mixer.mix(v), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(mixer.operator(), op, rtol=1e-12, atol=1e-12)


def test_low_rank_and_dense_paths_agree():
    # The Tucker path and the dense factor matrices: same parameters, same operator.
    low = make("40", rank=16)
    v = torch.randn(2, 40, 8, dtype=torch.float64)
    dense = torch.einsum("hij,bjhc->bihc", low.factors()[0], v.reshape(2, 40, 2, 4)).reshape(
        v.shape
    )
    torch.testing.assert_close(low.mix(v), dense, rtol=1e-12, atol=1e-12)


def test_dct_basis_is_orthonormal_and_low_frequency_first():
    basis = dct_basis(20, 7, dtype=torch.float64)
    torch.testing.assert_close(basis.T @ basis, torch.eye(7, dtype=torch.float64))
    assert torch.allclose(basis[:, 0], torch.full((20,), 1 / math.sqrt(20), dtype=torch.float64))


def assert_certified(mixer):
    bound = mixer.spectral_bound()
    assert (bound < 1).all()
    for f, dense in zip(mixer.axis_factors, mixer.factors()):
        if hasattr(f, "eigenvalues"):
            torch.testing.assert_close(dense, dense.transpose(1, 2))
            eig = torch.linalg.eigvalsh(dense)
            assert eig.min() > -1e-10 and eig.max() < 1
            u = f.basis()
            torch.testing.assert_close(
                u.T @ u, torch.eye(u.shape[1], dtype=u.dtype), rtol=1e-9, atol=1e-9
            )
        assert (torch.linalg.matrix_norm(dense, 2) <= f.bound() + 1e-12).all()
    norm = torch.linalg.matrix_norm(mixer.operator(), 2)
    assert (norm <= bound + 1e-10).all(), (norm, bound)


@pytest.mark.parametrize("grid,causal,rank", CASES)
def test_contraction_certificate_at_init_and_after_aggressive_training(grid, causal, rank):
    mixer = make(grid, causal, rank)
    assert_certified(mixer)
    opt = torch.optim.Adam(mixer.parameters(), lr=0.5)
    v = torch.randn(4, *mixer.grid, mixer.dim, dtype=torch.float64)
    # push the operator towards the identity times 5: as far out of the ball as it can go
    for _ in range(300):
        opt.zero_grad()
        loss = (mixer.mix(v) - 5 * v).pow(2).mean()
        loss.backward()
        opt.step()
    assert_certified(mixer)
    assert mixer.spectral_bound().max() > 0.99  # it did try


@pytest.mark.parametrize(
    "grid,causal", [("10", (0,)), ("5x6", (0,)), ("4x3x5", (0,)), ("4x3x5", (0, 2))]
)
def test_causal_axes_see_no_future(grid, causal):
    mixer = make(grid, causal, rank=2)
    v = torch.randn(1, *mixer.grid, mixer.dim, dtype=torch.float64, requires_grad=True)
    out = mixer.mix(v)
    jac_rows = []
    for index in [(0,) * mixer.grid.ndim, tuple(n // 2 for n in mixer.grid)]:
        grad = torch.autograd.grad(out[(0, *index)].sum(), v, retain_graph=True)[0][0].abs().sum(-1)
        for axis in range(mixer.grid.ndim):
            t = index[axis]
            future = grad.narrow(axis, t + 1, mixer.grid[axis] - t - 1)
            past = grad.narrow(axis, 0, t + 1)
            if axis in mixer.causal_axes:
                assert future.numel() == 0 or future.abs().max() == 0.0, (
                    f"axis {axis} leaks the future"
                )
            elif future.numel():
                assert future.abs().max() > 0, f"symmetric axis {axis} should see both sides"
            assert past.abs().max() > 0
        jac_rows.append(grad)


def test_regrid_transfers_parameters_and_resolution():
    torch.manual_seed(1)
    small = ConcentrationMixer(4, "16x12", num_heads=2, rank=6, modes=6).double()
    with torch.no_grad():
        small.axis_factors[0].theta.add_(torch.randn_like(small.axis_factors[0].theta))
    large = small.regrid("64x48")
    assert large.grid.shape == (64, 48)
    for f in large.axis_factors:
        u = f.basis()
        torch.testing.assert_close(
            u.T @ u, torch.eye(u.shape[1], dtype=u.dtype), rtol=1e-10, atol=1e-10
        )
    torch.testing.assert_close(large.spectral_bound(), small.spectral_bound())
    assert (large.spectral_bound() < 1).all()

    def field(n0, n1):  # a smooth field sampled at cell centres of the unit square
        y = (torch.arange(n0, dtype=torch.float64) + 0.5) / n0
        x = (torch.arange(n1, dtype=torch.float64) + 0.5) / n1
        base = (
            torch.cos(math.pi * y)[:, None] * torch.cos(2 * math.pi * x)[None, :] + 0.5 * y[:, None]
        )
        return torch.stack([base, base**2, -base, base + 1], dim=-1)[None]  # (1, n0, n1, 4)

    out_small = small.mix(field(16, 12))
    out_large = large.mix(field(64, 48))
    # average-pool the fine result onto the coarse cells: both approximate the same continuous
    # operator
    pooled = torch.nn.functional.avg_pool2d(out_large.permute(0, 3, 1, 2), 4).permute(0, 2, 3, 1)
    rel = (pooled - out_small).norm() / out_small.norm()
    assert rel < 0.02, rel
    with pytest.raises(ValueError, match="modes"):
        small.regrid("4x12")


def test_gradcheck_tiny_grid():
    mixer = make("3x4", (1,), rank=2, dim=4)
    v = torch.randn(1, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(mixer.mix, (v,))
    x = torch.randn(1, 1 + 12, 4, dtype=torch.float64, requires_grad=True)
    prefixed = make("3x4", rank=2, dim=4, num_prefix_tokens=1)
    assert torch.autograd.gradcheck(prefixed, (x,))
    params = list(mixer.axis_factors.parameters())  # W_v, W_o are not used by the bare operator
    assert all(p.grad is None for p in params)
    mixer.mix(v).pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_shapes_and_dtypes(dtype):
    mixer = ConcentrationMixer(
        16, "8x6", num_heads=4, rank=3, causal_axes=(0,), num_prefix_tokens=2
    ).to(dtype)
    x = torch.randn(3, 2 + 48, 16, dtype=dtype)
    y = mixer(x)
    assert y.shape == x.shape and y.dtype == dtype and torch.isfinite(y.float()).all()
    v = torch.randn(3, 8, 6, 16, dtype=dtype)
    assert mixer.mix(v).dtype == dtype
    if dtype == torch.bfloat16:
        ref = mixer.float().mix(v.float())
        assert (mixer.mix(v).float() - ref).abs().max() < 0.05
    else:
        y.float().sum().backward()


def test_prefix_tokens_modes():
    mean_mixer = make("4x4", rank=2, num_prefix_tokens=1)
    ident = make("4x4", rank=2, num_prefix_tokens=1, prefix_mode="identity")
    ident.load_state_dict(mean_mixer.state_dict())
    x = torch.randn(2, 17, 8, dtype=torch.float64)
    v = mean_mixer.v(x)
    grid_part = mean_mixer.mix(v[:, 1:].reshape(2, 4, 4, 8)).reshape(2, 16, 8)
    torch.testing.assert_close(ident(x)[:, 0], ident.proj(v[:, 0]))
    torch.testing.assert_close(
        mean_mixer(x)[:, 0], mean_mixer.proj(0.5 * (v[:, 0] + grid_part.mean(1)))
    )
    torch.testing.assert_close(mean_mixer(x)[:, 1:], mean_mixer.proj(grid_part))


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="divisible"):
        ConcentrationMixer(10, "4x4", num_heads=3)
    with pytest.raises(ValueError, match="out of range"):
        ConcentrationMixer(8, "4x4", num_heads=2, causal_axes=(2,))
    with pytest.raises(ValueError, match="modes"):
        ConcentrationMixer(8, "4x4", num_heads=2, modes=(5, 2))
    with pytest.raises(ValueError, match="one per axis"):
        ConcentrationMixer(8, "4x4", num_heads=2, rank=(2, 2, 2))
    mixer = ConcentrationMixer(8, "4x4", num_heads=2)
    with pytest.raises(
        ValueError, match=r"x has shape \(2, 15, 8\); expected \(B, 0 prefix \+ 16 grid"
    ):
        mixer(torch.randn(2, 15, 8))
    with pytest.raises(ValueError, match="attn_mask"):
        mixer(torch.randn(2, 16, 8), attn_mask=torch.ones(16, 16))
    with pytest.raises(ValueError, match="causal_axes"):
        mixer(torch.randn(2, 16, 8), is_causal=True)
    with pytest.warns(UserWarning, match="qk_norm"):
        ConcentrationMixer(8, "4x4", num_heads=2, qk_norm=True, norm_layer=torch.nn.LayerNorm)
    with pytest.raises(TypeError, match="unexpected"):
        ConcentrationMixer(8, "4x4", num_heads=2, window=3)


def test_tucker_flops_follow_the_cheapest_projection_order():
    # 16x32x32 at rank 16: axis 0 does not shrink (r = n), so it is projected last, after 32 -> 16
    # twice
    c = 8
    macs = c * (16 * 32 * 32 * 16 + 16 * 16 * 32 * 16 + 16 * 16 * 16 * 16)  # axis 1, axis 2, axis 0
    assert tucker_flops((16, 32, 32), dim=c, rank=16) == 2 * 2 * macs
    # axis 0 first: no saving
    axis_order = c * (16 * 32 * 32 * 16 + 16 * 32 * 32 * 16 + 16 * 16 * 32 * 16)
    assert tucker_flops((16, 32, 32), dim=c, rank=16) < 2 * 2 * axis_order
    assert projection_order([16, 32, 32], [16, 16, 16]) == [1, 2, 0]


def test_tucker_flops_counts_each_mode_product():
    # 64x64, C=64, r=16: down axis 0: 64·16·64 MACs·C, axis 1: 16·16·64·C, the same up again.
    per_pass = 2 * 64 * (64 * 16 * 64 + 16 * 16 * 64)
    assert tucker_flops("64x64", dim=64, rank=16) == 2 * per_pass


def test_basis_survives_adamw_weight_decay():
    # Regression: torch's Householder map reads the (gradient-free) diagonal with .int(); weight
    # decay shrank it below 1 and every column of U became zero after the first AdamW step.
    mixer = ConcentrationMixer(8, "40", num_heads=2, rank=16)
    opt = torch.optim.AdamW(mixer.parameters(), lr=1e-2, weight_decay=0.5)
    v = torch.randn(2, 40, 8)
    for _ in range(20):
        opt.zero_grad()
        mixer.mix(v).pow(2).mean().backward()
        opt.step()
    u = mixer.axis_factors[0].basis()
    torch.testing.assert_close(u.T @ u, torch.eye(16), rtol=1e-5, atol=1e-5)
    assert (mixer.mix(v).norm() / v.norm()) > 0.05


def _far_square_weight(mixer: ConcentrationMixer) -> float:
    """Mean weight of the (head 0) operator from a 12x12 square at the corner to one 16 tokens away
    on 32x32."""
    factor = mixer.factors()[0][0].detach()  # (32, 32), both axes start alike
    return float(factor[:12, 16:28].mean() ** 2)


def test_global_start_sees_the_whole_grid_and_lowpass_stays_local():
    uniform = 1 / 1024  # what attention's uniform start gives every pair of tokens on 32x32
    lowpass = ConcentrationMixer(8, "32x32", num_heads=2, rank=16)
    global_ = ConcentrationMixer(8, "32x32", num_heads=2, rank=16, start="global")
    assert _far_square_weight(lowpass) < 1e-3 * uniform
    assert 0.5 * uniform < _far_square_weight(global_) < uniform
    # the global start is still a contraction, and the default start is unchanged (lowpass)
    assert (global_.spectral_bound() < 1).all()
    assert torch.equal(lowpass.axis_factors[0].theta[0], torch.linspace(2.0, 0.0, 16))


def test_mean_start_is_nearer_the_averaging_operator_than_global_and_still_a_contraction():
    uniform = 1 / 1024
    global_ = ConcentrationMixer(8, "32x32", num_heads=2, rank=16, start="global")
    mean = ConcentrationMixer(8, "32x32", num_heads=2, rank=16, start="mean")
    assert _far_square_weight(global_) < _far_square_weight(mean) < uniform
    # (h, r): the DC mode at sigmoid(4), the others at sigmoid(-4)
    eigenvalues = mean.axis_factors[0].eigenvalues()
    torch.testing.assert_close(eigenvalues[:, 0], torch.sigmoid(torch.tensor([4.0, 4.0])))
    torch.testing.assert_close(eigenvalues[:, 1:], torch.sigmoid(torch.full((2, 15), -4.0)))
    assert (mean.spectral_bound() < 1).all()
    causal = ConcentrationMixer(
        8, "6x10", num_heads=2, rank=4, causal_axes=(0,), start="mean"
    ).axis_factors[0]
    kernel = causal.kernel()  # (h, 6): flat, with the gain sigmoid(4)
    torch.testing.assert_close(
        kernel, torch.full((2, 6), torch.sigmoid(torch.tensor(4.0)).item() / 6)
    )


def test_start_per_axis_and_on_causal_axes():
    mixer = ConcentrationMixer(
        8, "6x10", num_heads=2, rank=4, causal_axes=(0,), start=("global", "lowpass")
    )
    kernel = mixer.axis_factors[0].kernel()  # (h, 6): flat, a running mean
    assert torch.allclose(kernel, kernel[:, :1].expand_as(kernel))
    assert mixer.config["start"] == ("global", "lowpass")
    assert mixer.regrid("6x12").config["start"] == ("global", "lowpass")
    lowpass_kernel = (
        ConcentrationMixer(8, "6x10", num_heads=2, rank=4, causal_axes=(0,))
        .axis_factors[0]
        .kernel()
    )
    # decaying: most weight on the present step
    assert (lowpass_kernel[:, 0] > 10 * lowpass_kernel[:, -1]).all()


@pytest.mark.parametrize("start", ["uniform", ("global",), ("global", "global", "global")])
def test_bad_start_is_a_value_error(start):
    with pytest.raises(ValueError, match="start"):
        ConcentrationMixer(8, "6x10", num_heads=2, start=start)
