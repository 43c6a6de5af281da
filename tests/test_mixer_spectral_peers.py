"""The peer mixers: GFNet's global filter, S4ND and MLP-Mixer's token MLP, each against an
independently computed float64 reference (numpy dense operators built from the parameters), plus the
contract: shapes, prefix tokens, gradients, device and dtype, causal refusal or exact causality, and
resolution change."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import erf
from torch import nn

from gridmix.core.grid import Grid
from gridmix.mixers.contract import MixerSpec
from gridmix.mixers.global_filter import (
    GlobalFilterMixer,
    build_global_filter,
    regrid_global_filter,
)
from gridmix.mixers.s4nd import S4NDMixer, build_s4nd, regrid_s4nd
from gridmix.mixers.token_mlp import MAX_TOKENS, TokenMLPMixer, build_token_mlp

pytestmark = pytest.mark.usefixtures("one_thread")

BUILDERS = {"global-filter": build_global_filter, "s4nd": build_s4nd, "token-mlp": build_token_mlp}
GRIDS = [(7,), (4, 6), (2, 3, 4)]
TIMM_KWARGS = dict(
    qkv_bias=True,
    qk_norm=False,
    scale_norm=False,
    proj_bias=True,
    attn_drop=0.0,
    proj_drop=0.0,
    norm_layer=nn.LayerNorm,
    depth=2,
)


def tokens(grid, *, dim=3, prefix=0, batch=2, seed=0, requires_grad=False) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, prefix + math.prod(grid), dim, generator=generator, dtype=torch.float64)
    return x.requires_grad_(requires_grad)


def gelu(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1 + erf(v / math.sqrt(2)))


def mode_product(u: np.ndarray, matrices: np.ndarray, axis: int) -> np.ndarray:
    """``u`` (B, *grid, C) times per-channel matrices (C, n, n) along grid ``axis``."""
    moved = np.moveaxis(u, axis + 1, -2)  # (B, …, n, C)
    return np.moveaxis(np.einsum("cij,...jc->...ic", matrices, moved), -2, axis + 1)


# ---------------------------------------------------------------- references


def global_filter_reference(x: np.ndarray, weight: np.ndarray, grid, prefix: int) -> np.ndarray:
    """The dense circulant: the real kernel of the filter's Hermitian extension, as an N×N matrix
    per channel."""
    B, _, C = x.shape
    half = weight[..., 0] + 1j * weight[..., 1]  # (*F, C)
    full = np.zeros((*grid, C), dtype=complex)
    # bins past the half-spectrum are the conjugates of their mirror images
    for k in np.ndindex(*grid):
        full[k] = (
            half[k]
            if k[-1] <= grid[-1] // 2
            else np.conj(half[tuple((-i) % n for i, n in zip(k, grid))])
        )
    kernel = np.real(np.fft.ifftn(full, axes=tuple(range(len(grid)))))  # (*grid, C)
    points = list(np.ndindex(*grid))
    circulant = np.array(
        [
            [kernel[tuple((a - b) % n for a, b, n in zip(t, s, grid))] for s in points]
            for t in points
        ]
    )  # (N, N, C)
    y = np.einsum("tsc,bsc->btc", circulant, x[:, prefix:])
    return np.concatenate([x[:, :prefix], y], axis=1)


def s4d_kernels(axis_kernel, length: int) -> np.ndarray:
    """S4D's kernel (D, C, n) from one axis's parameters, in numpy."""
    p = {k: v.detach().numpy() for k, v in axis_kernel.named_parameters()}
    dt = np.exp(p["log_dt"]) * float(axis_kernel.dt_scale)  # (C,)
    A = -np.exp(p["log_A_real"]) + 1j * p["A_imag"]  # (C, S)
    C = p["C"][..., 0] + 1j * p["C"][..., 1]  # (D, C, S)
    out = np.zeros((C.shape[0], C.shape[1], length))
    for d in range(C.shape[0]):
        for c in range(C.shape[1]):
            for s in range(C.shape[2]):
                dtA = dt[c] * A[c, s]
                out[d, c] += 2 * np.real(
                    C[d, c, s] * (np.exp(dtA) - 1) / A[c, s] * np.exp(dtA * np.arange(length))
                )
    return out


def s4d_toeplitz(kernels: np.ndarray, causal: bool) -> np.ndarray:
    """Per channel (C, n, n): ``T[i, j] = K_fwd[i − j]`` for ``i ≥ j``; else ``K_back[j − i − 1]``,
    or 0 if causal."""
    _, C, n = kernels.shape
    T = np.zeros((C, n, n))
    for i in range(n):
        for j in range(n):
            if i >= j:
                T[:, i, j] = kernels[0, :, i - j]
            elif not causal:
                T[:, i, j] = kernels[1, :, j - i - 1]
    return T


def s4nd_reference(module: S4NDMixer, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the bare convolution on the grid (B, *grid, C), the whole output (B, P + N, C)) with dense
    mode products."""
    grid, P = module.grid.shape, module.num_prefix_tokens
    B, _, C = x.shape
    u = x[:, P:].reshape(B, *grid, C)
    conv = u
    for k, n in enumerate(grid):
        T = s4d_toeplitz(s4d_kernels(module.axis_kernels[k], n), causal=k in module.causal_axes)
        conv = mode_product(conv, T, k)
    pre = (conv + u * module.D.detach().numpy()).reshape(B, -1, C)
    W, b = module.proj.weight.detach().numpy(), module.proj.bias.detach().numpy()
    y = gelu(pre) @ W.T + b
    return conv, np.concatenate([x[:, :P], y], axis=1)


def randomise_s4nd(module: S4NDMixer, seed: int = 1) -> S4NDMixer:
    """Steps and decays away from the initialisation, so that the convolution dominates the skip
    term."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for kernel in module.axis_kernels:
            kernel.log_dt.copy_(
                torch.empty_like(kernel.log_dt).uniform_(math.log(0.3), 0.0, generator=generator)
            )
            kernel.log_A_real.add_(
                0.3
                * torch.randn(
                    kernel.log_A_real.shape, generator=generator, dtype=kernel.log_A_real.dtype
                )
            )
    return module


def token_mlp_reference(module: TokenMLPMixer, x: np.ndarray) -> np.ndarray:
    W1, b1 = module.fc1.weight.detach().numpy(), module.fc1.bias.detach().numpy()
    W2, b2 = module.fc2.weight.detach().numpy(), module.fc2.bias.detach().numpy()
    P = module.num_prefix_tokens
    y = np.zeros_like(x[:, P:])
    for b in range(x.shape[0]):
        for c in range(x.shape[2]):
            y[b, :, c] = W2 @ gelu(W1 @ x[b, P:, c] + b1) + b2
    return np.concatenate([x[:, :P], y], axis=1)


# ---------------------------------------------------------------- the contract, for every mixer


@pytest.mark.parametrize("name", BUILDERS)
@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("prefix", [0, 2])
def test_output_has_the_input_shape(name, grid, prefix):
    mixer = BUILDERS[name](
        3, Grid(grid), num_heads=1, num_prefix_tokens=prefix, dtype=torch.float64, **TIMM_KWARGS
    )
    x = tokens(grid, prefix=prefix)
    y = mixer(x)
    assert y.shape == x.shape == (2, prefix + math.prod(grid), 3) and y.dtype == torch.float64
    assert torch.isfinite(y).all()


@pytest.mark.parametrize("name", BUILDERS)
def test_gradients_reach_the_input_and_every_parameter(name):
    grid, prefix = (4, 6), 1
    mixer = BUILDERS[name](3, grid, num_heads=1, num_prefix_tokens=prefix, dtype=torch.float64)
    x = tokens(grid, prefix=prefix, requires_grad=True)
    mixer(x)[:, prefix:].square().sum().backward()
    assert x.grad[:, prefix:].abs().sum() > 0
    # prefix outputs not in the loss
    assert torch.equal(x.grad[:, :prefix], torch.zeros_like(x.grad[:, :prefix]))
    for pname, p in mixer.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


@pytest.mark.parametrize("name", BUILDERS)
def test_prefix_tokens_pass_through_unchanged(name):
    grid, prefix = (3, 4), 3
    mixer = BUILDERS[name](3, grid, num_heads=1, num_prefix_tokens=prefix, dtype=torch.float64)
    x = tokens(grid, prefix=prefix)
    y = mixer(x)
    assert torch.equal(y[:, :prefix], x[:, :prefix])
    changed = x.clone()
    changed[:, :prefix] += 1.0  # the grid tokens do not see the prefix tokens either
    torch.testing.assert_close(mixer(changed)[:, prefix:], y[:, prefix:], rtol=0, atol=0)


@pytest.mark.parametrize("name", BUILDERS)
def test_dtype_and_device_are_respected(name):
    mixer = BUILDERS[name](4, (3, 4), num_heads=2, dtype=torch.float64)
    assert all(t.dtype == torch.float64 for t in [*mixer.parameters(), *mixer.buffers()])
    meta = BUILDERS[name](4, (3, 4), num_heads=2, device=torch.device("meta"))
    assert all(t.device.type == "meta" for t in [*meta.parameters(), *meta.buffers()])
    assert all(t.dtype == torch.float32 for t in meta.parameters())


@pytest.mark.parametrize("name", BUILDERS)
def test_wrong_inputs_are_refused_in_one_line(name):
    mixer = BUILDERS[name](3, (3, 4), num_heads=1, num_prefix_tokens=1, dtype=torch.float64)
    with pytest.raises(
        ValueError, match=r"x has shape \(2, 12, 3\); expected \(B, 1 prefix \+ 12 grid tokens = 13"
    ):
        mixer(tokens((3, 4)))
    with pytest.raises(ValueError, match="attn_mask"):
        mixer(tokens((3, 4), prefix=1), attn_mask=torch.ones(13, 13, dtype=torch.bool))
    with pytest.raises(ValueError, match="is_causal=True"):
        mixer(tokens((3, 4), prefix=1), is_causal=True)
    with pytest.raises(ValueError, match="dim=0; expected a positive integer"):
        BUILDERS[name](0, (3, 4), num_heads=1)


@pytest.mark.parametrize("name", BUILDERS)
def test_a_timm_block_builds_and_runs_the_mixer(name):
    from timm.models.vision_transformer import Block

    spec = MixerSpec(
        name=name,
        build=BUILDERS[name],
        causal="any" if name == "s4nd" else "none",
        prefix_tokens=True,
    )
    block = Block(8, num_heads=2, attn_layer=spec.layer("4x4", num_prefix_tokens=1))
    x = torch.randn(2, 17, 8)
    assert block(x).shape == x.shape


# ---------------------------------------------------------------- symmetric mixers refuse causal
# axes


@pytest.mark.parametrize("name", ["global-filter", "token-mlp"])
def test_the_symmetric_mixers_refuse_causal_axes(name):
    with pytest.raises(
        ValueError, match=r"sees every token .*; got causal_axes=\(0,\), expected \(\)$"
    ):
        BUILDERS[name](3, (4, 4), num_heads=1, causal_axes=(0,))
    with pytest.raises(ValueError, match=r"got causal_axes=\(0, 1\), expected \(\)$"):
        BUILDERS[name](3, (4, 4), num_heads=1, causal_axes=[0, 1])


# ---------------------------------------------------------------- global filter


@pytest.mark.parametrize("grid", [(6,), (5,), (4, 6), (3, 5), (2, 3, 4)])
def test_global_filter_is_the_dense_circular_convolution(grid):
    mixer = build_global_filter(3, grid, num_heads=1, num_prefix_tokens=1, dtype=torch.float64)
    x = tokens(grid, prefix=1)
    expected = global_filter_reference(x.numpy(), mixer.complex_weight.detach().numpy(), grid, 1)
    np.testing.assert_allclose(mixer(x).detach().numpy(), expected, rtol=0, atol=1e-10)


def test_global_filter_is_initialised_as_gfnet():
    mixer = build_global_filter(16, (8, 10), num_heads=1)
    assert mixer.complex_weight.shape == (8, 6, 16, 2)  # (n_1, n_2 // 2 + 1, C, real/imag)
    assert 0.015 < mixer.complex_weight.std().item() < 0.025


def test_global_filter_regrid_is_identical_on_the_same_grid():
    mixer = build_global_filter(3, (4, 6), num_heads=1, num_prefix_tokens=1, dtype=torch.float64)
    same = regrid_global_filter(mixer, "4x6")
    assert same is not mixer and torch.equal(same.complex_weight, mixer.complex_weight)
    x = tokens((4, 6), prefix=1)
    assert torch.equal(same(x), mixer(x))


@pytest.mark.parametrize(
    ("old", "new", "mode"),
    [
        ((6,), (10,), "linear"),
        ((4, 6), (7, 9), "bilinear"),
        ((2, 3, 4), (3, 5, 6), "trilinear"),
        ((4, 6), (4, 10), "bilinear"),
    ],
)
def test_global_filter_regrid_interpolates_the_filter_linearly(old, new, mode):
    mixer = build_global_filter(3, old, num_heads=1, dtype=torch.float64)
    other = mixer.regrid(new)
    weight = mixer.complex_weight.detach()  # (*F, C, 2)
    d = len(old)
    channels_first = weight.flatten(-2).movedim(-1, 0)[None]  # (1, 2C, *F)
    size = (*new[:-1], new[-1] // 2 + 1)
    expected = torch.nn.functional.interpolate(
        channels_first, size=size, mode=mode, align_corners=True
    )
    expected = expected[0].movedim(0, -1).reshape(*size, 3, 2)
    torch.testing.assert_close(other.complex_weight.detach(), expected, rtol=0, atol=1e-12)
    x = tokens(new, prefix=0)
    assert other.grid == Grid(new) and other(x).shape == x.shape
    np.testing.assert_allclose(
        other(x).detach().numpy(),
        global_filter_reference(x.numpy(), expected.numpy(), new, 0),
        rtol=0,
        atol=1e-10,
    )
    with pytest.raises(ValueError, match=f"expected a {d}-d grid"):
        mixer.regrid((4,) * (d + 1))


# ---------------------------------------------------------------- S4ND


@pytest.mark.parametrize(
    ("grid", "causal"),
    [
        ((7,), ()),
        ((7,), (0,)),
        ((4, 5), ()),
        ((4, 5), (0,)),
        ((4, 5), (-1,)),
        ((3, 4), (0, 1)),
        ((2, 3, 4), ()),
        ((2, 3, 4), (0, 2)),
    ],
)
def test_s4nd_is_the_dense_toeplitz_mode_products(grid, causal):
    mixer = randomise_s4nd(
        build_s4nd(
            3,
            grid,
            num_heads=1,
            causal_axes=causal,
            num_prefix_tokens=1,
            d_state=4,
            dtype=torch.float64,
        )
    )
    x = tokens(grid, prefix=1)
    conv, expected = s4nd_reference(mixer, x.numpy())
    u = x[:, 1:].reshape(2, *grid, 3)
    np.testing.assert_allclose(mixer.mix(u).detach().numpy(), conv, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mixer(x).detach().numpy(), expected, rtol=0, atol=1e-9)
    assert np.abs(conv).max() > 0.1  # the convolution itself is tested, not only the skip term


def test_s4nd_is_initialised_as_s4d_lin():
    mixer = build_s4nd(4, (5, 6), num_heads=1, causal_axes=(1,), d_state=16)
    forward_and_back, forward_only = mixer.axis_kernels
    assert forward_and_back.C.shape == (2, 4, 8, 2) and forward_only.C.shape == (1, 4, 8, 2)
    A_real = -forward_and_back.log_A_real.exp()
    torch.testing.assert_close(A_real, torch.full((4, 8), -0.5))
    torch.testing.assert_close(forward_and_back.A_imag, math.pi * torch.arange(8.0).repeat(4, 1))
    dt = torch.cat([k.log_dt.exp() for k in mixer.axis_kernels])
    assert (dt >= 0.001).all() and (dt <= 0.1).all()
    with pytest.raises(ValueError, match="d_state=5; expected an even integer >= 2"):
        build_s4nd(4, (5, 6), num_heads=1, d_state=5)
    with pytest.raises(
        ValueError, match=r"causal axis 2 for the 2-d grid 5x6; expected an integer in \[-2, 1\]"
    ):
        build_s4nd(4, (5, 6), num_heads=1, causal_axes=(2,))


@pytest.mark.parametrize("length", [12, 300])
@pytest.mark.parametrize("is_causal", [False, True])
def test_s4nd_future_inputs_get_exactly_zero_gradient_1d(length, is_causal):
    mixer = build_s4nd(
        2,
        (length,),
        num_heads=1,
        causal_axes=(0,),
        num_prefix_tokens=1,
        d_state=4,
        dtype=torch.float64,
    )
    for t in (0, length // 3, length - 2):
        x = tokens((length,), dim=2, prefix=1, requires_grad=True)
        mixer(x, is_causal=is_causal)[:, 1 + t].sum().backward()
        grid_grad = x.grad[:, 1:]  # (B, n, C)
        assert torch.equal(grid_grad[:, t + 1 :], torch.zeros_like(grid_grad[:, t + 1 :])), t
        assert (grid_grad[:, : t + 1].abs().sum(-1) > 0).all(), t  # every past input reaches it


@pytest.mark.parametrize("is_causal", [False, True])
def test_s4nd_future_rows_get_exactly_zero_gradient_2d(is_causal):
    grid = (5, 6)
    mixer = build_s4nd(2, grid, num_heads=1, causal_axes=(0,), d_state=4, dtype=torch.float64)
    for row, col in ((0, 3), (2, 0), (3, 5)):
        x = tokens(grid, dim=2, requires_grad=True)
        mixer(x, is_causal=is_causal)[:, row * grid[1] + col].sum().backward()
        grad = x.grad.reshape(2, *grid, 2)
        assert torch.equal(grad[:, row + 1 :], torch.zeros_like(grad[:, row + 1 :]))
        # the past rows, every column (axis 1 is symmetric)
        assert (grad[:, : row + 1].abs().sum((0, -1)) > 0).all()


def test_s4nd_regrid_is_identical_on_the_same_grid():
    mixer = build_s4nd(
        3, (4, 5), num_heads=1, causal_axes=(0,), num_prefix_tokens=1, dtype=torch.float64
    )
    same = regrid_s4nd(mixer, (4, 5))
    assert same is not mixer
    for (name, a), b in zip(mixer.state_dict().items(), same.state_dict().values()):
        assert torch.equal(a, b), name
    x = tokens((4, 5), prefix=1)
    assert torch.equal(same(x), mixer(x))


def test_s4nd_regrid_scales_each_step_by_the_length_ratio():
    mixer = randomise_s4nd(
        build_s4nd(
            3,
            (4, 6),
            num_heads=1,
            causal_axes=(1,),
            num_prefix_tokens=1,
            d_state=4,
            dtype=torch.float64,
        )
    )
    other = mixer.regrid("8x3")
    assert other.grid == Grid((8, 3))
    assert [float(k.dt_scale) for k in other.axis_kernels] == [0.5, 2.0]
    for (name, a), b in zip(mixer.named_parameters(), other.parameters()):
        assert torch.equal(a, b), name
    x = tokens((8, 3), prefix=1)
    y = other(x)
    assert y.shape == (2, 25, 3)
    np.testing.assert_allclose(
        y.detach().numpy(), s4nd_reference(other, x.numpy())[1], rtol=0, atol=1e-9
    )
    np.testing.assert_allclose(
        other.regrid((4, 6))(tokens((4, 6), prefix=1)).detach().numpy(),
        mixer(tokens((4, 6), prefix=1)).detach().numpy(),
        rtol=0,
        atol=1e-12,
    )
    with pytest.raises(ValueError, match="expected a 2-d grid"):
        regrid_s4nd(mixer, "8")


# ---------------------------------------------------------------- token MLP


@pytest.mark.parametrize("grid", GRIDS)
def test_token_mlp_is_the_per_channel_mlp(grid):
    mixer = build_token_mlp(3, grid, num_heads=1, num_prefix_tokens=2, dtype=torch.float64)
    with torch.no_grad():  # biases away from timm's 1e-6 init, so that they are tested too
        mixer.fc1.bias.normal_()
        mixer.fc2.bias.normal_()
    x = tokens(grid, prefix=2)
    np.testing.assert_allclose(
        mixer(x).detach().numpy(), token_mlp_reference(mixer, x.numpy()), rtol=0, atol=1e-10
    )


def test_token_mlp_hidden_size_and_token_limit():
    assert MAX_TOKENS == 4096
    assert build_token_mlp(3, (4, 6), num_heads=1).hidden == 12
    assert build_token_mlp(3, (4, 6), num_heads=1, token_ratio=2.0).fc1.weight.shape == (48, 24)
    with pytest.raises(ValueError, match="got 4225 tokens on 65x65; expected at most 4096"):
        build_token_mlp(3, (65, 65), num_heads=1)
    with pytest.raises(ValueError, match="token_ratio=0.1 gives"):
        build_token_mlp(3, (3, 3), num_heads=1, token_ratio=0.1)


def test_builders_return_the_mixer_classes():
    assert isinstance(build_global_filter(3, 8, num_heads=1), GlobalFilterMixer)
    assert isinstance(build_s4nd(3, 8, num_heads=1), S4NDMixer)
    assert isinstance(build_token_mlp(3, 8, num_heads=1), TokenMLPMixer)
