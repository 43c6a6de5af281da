"""The fast causal mode product equals the dense Toeplitz reference, is exactly causal, and keeps
the certificate."""

from __future__ import annotations

import math

import pytest
import torch

from gridmix import ConcentrationMixer, Grid
from gridmix.mixers.builtin import BUILTIN
from gridmix.mixers.concentration.ops.causal import (
    causal_mode_product,
    causal_mode_product_dense,
    causal_toeplitz,
)
from gridmix.models import MixerConfig

SHAPES = [  # (x shape (…, h, c), causal axis, kernel length)
    ((2, 100, 3, 4), 1, 100),  # 1-D, full-length kernel, n not a power of two
    ((2, 5, 37, 3, 4), 2, 20),  # 2-D, causal last axis, short kernel
    ((2, 37, 5, 3, 4), 1, 37),  # 2-D, causal first axis
    ((2, 7, 9, 6, 2, 3), 1, 5),  # 3-D: causal time, two other axes
    ((1, 1, 2, 3), 1, 1),  # a single step
    ((2, 300, 2, 3), 1, 300),  # several levels above the leaves
]


@pytest.mark.parametrize("leaf", [1, 4, 256])
@pytest.mark.parametrize("shape,axis,m", SHAPES)
def test_values_and_gradients_equal_the_dense_reference_in_float64(shape, axis, m, leaf):
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    kernel = torch.rand(shape[-2], m, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(shape, dtype=torch.float64)
    fast = causal_mode_product(x, kernel, axis, leaf=leaf)
    reference = causal_mode_product_dense(x, kernel, axis)
    torch.testing.assert_close(fast, reference, rtol=1e-12, atol=1e-12)
    for got, expected in zip(
        torch.autograd.grad(fast, (x, kernel), grad),
        torch.autograd.grad(reference, (x, kernel), grad),
    ):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_dense_reference_is_the_toeplitz_definition():
    kernel = torch.rand(2, 4, dtype=torch.float64)
    expected = torch.zeros(2, 9, 9, dtype=torch.float64)
    for i in range(9):
        for j in range(max(0, i - 3), i + 1):
            expected[:, i, j] = kernel[:, i - j]
    assert torch.equal(causal_toeplitz(kernel, 9), expected)


def _one_fft(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """A plain zero-padded FFT convolution along axis 1 of (B, n, h, c): correct, but rounding mixes
    the future in."""
    n = x.shape[1]
    spectrum = torch.fft.rfft(x.movedim(1, -1), n=2 * n) * torch.fft.rfft(kernel, n=2 * n)[:, None]
    return torch.fft.irfft(spectrum, n=2 * n)[..., :n].movedim(-1, 1)


@pytest.mark.parametrize("method", ["blocked", "one_fft"])
def test_future_inputs_get_exactly_zero_gradient_and_do_not_move_the_past(method):
    torch.manual_seed(1)
    n, t = 1000, 400
    x = torch.randn(2, n, 2, 3, requires_grad=True)  # float32: where FFT rounding is largest
    kernel = torch.rand(2, n)
    apply = (
        (lambda v: causal_mode_product(v, kernel, 1, leaf=16))
        if method == "blocked"
        else (lambda v: _one_fft(v, kernel))
    )
    out = apply(x)
    grad = torch.autograd.grad(out[:, : t + 1].sum(), x)[0]  # (2, n, 2, 3): a loss on positions ≤ t
    moved = apply(torch.cat([x[:, : t + 1], 1e3 * torch.randn(2, n - t - 1, 2, 3)], dim=1))
    exact = grad[:, t + 1 :].abs().max().item() == 0.0 and torch.equal(
        moved[:, : t + 1], out[:, : t + 1]
    )
    assert grad[:, : t + 1].abs().min() > 0
    assert exact == (method == "blocked")  # the plain FFT leaks by rounding: the test can tell


def test_certificate_bounds_the_operator():
    torch.manual_seed(2)
    mixer = ConcentrationMixer(8, "40", num_heads=2, rank=2, causal_axes=(0,)).double()
    with torch.no_grad():
        mixer.axis_factors[0].kernel_logits.normal_(0.0, 3.0)
        mixer.axis_factors[0].gain_logit.fill_(6.0)
    factor = mixer.axis_factors[0]
    assert (factor.kernel().abs().sum(-1) < 1).all()
    norms = torch.linalg.matrix_norm(factor.dense(), ord=2)  # (h,)
    assert (norms <= factor.bound() + 1e-12).all() and (factor.bound() < 1).all()
    x = torch.randn(3, 40, 2, 4, dtype=torch.float64)
    y = causal_mode_product(x, factor.kernel(), 1)
    ratio = y.norm(dim=1) / x.norm(dim=1)  # (3, h, c): per column, ‖T x‖ / ‖x‖
    assert (ratio <= factor.bound()[:, None] + 1e-12).all()


def test_autocast_keeps_float32_and_the_input_dtype():
    torch.manual_seed(3)
    x, kernel = torch.randn(2, 70, 2, 3), torch.rand(2, 70)
    plain = causal_mode_product(x, kernel, 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = causal_mode_product(x, kernel, 1)
    assert inside.dtype == torch.float32 and torch.equal(inside, plain)
    half = causal_mode_product(x.bfloat16(), kernel, 1)
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(
        half.float(), causal_mode_product(x.bfloat16().float(), kernel, 1).bfloat16().float()
    )


@pytest.mark.parametrize(
    "grid,causal", [("300", (0,)), ("20x7", (0,)), ("6x5x40", (2,)), ("9x4x5", (0, 2))]
)
def test_mixer_with_causal_axes_equals_its_dense_operator(grid, causal):
    torch.manual_seed(4)
    mixer = ConcentrationMixer(4, grid, num_heads=2, rank=2, causal_axes=causal).double()
    with torch.no_grad():
        for p in mixer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    v = torch.randn(2, *mixer.grid, 4, dtype=torch.float64)
    ops = mixer.operator()  # (h, N, N)
    heads = v.reshape(2, mixer.grid.numel, 2, 2)  # (B, N, h, c)
    expected = torch.einsum("hij,bjhc->bihc", ops, heads).reshape(v.shape)
    torch.testing.assert_close(mixer.mix(v), expected, rtol=1e-10, atol=1e-12)


def test_bad_arguments_name_the_values():
    with pytest.raises(ValueError, match=r"kernel \(3, 5\)"):
        causal_mode_product(torch.randn(1, 4, 2, 3), torch.rand(3, 5), 1)
    with pytest.raises(ValueError, match="axis=3"):
        causal_mode_product(torch.randn(1, 4, 2, 3), torch.rand(2, 4), 3)
    with pytest.raises(ValueError, match="branch=3"):
        causal_mode_product(torch.randn(1, 4, 2, 3), torch.rand(2, 4), 1, branch=3)


@pytest.mark.parametrize("start", ["global", "mean", "lowpass"])
def test_the_start_sets_how_far_back_a_causal_axis_sees_at_step_0_and_stays_causal_and_certified(
    start,
):
    torch.manual_seed(5)
    n = 64
    mixer = ConcentrationMixer(
        4, str(n), num_heads=2, rank=2, causal_axes=(0,), start=start
    ).double()
    factor = mixer.axis_factors[0]
    assert factor.start == start and (factor.bound() < 1).all()
    kernel = factor.kernel()  # (h, m)
    torch.testing.assert_close(kernel.sum(-1), factor.bound())
    x = torch.randn(2, n, 4, dtype=torch.float64, requires_grad=True)
    t = 40
    # (n,): per input position
    grad = torch.autograd.grad(mixer.mix(x)[:, t].sum(), x)[0].abs().sum(dim=(0, 2))
    assert grad[t + 1 :].max().item() == 0.0  # exactly causal either way
    reach = (grad[0] / grad[t]).item()  # the first token's pull on step t, relative to step t's own
    if start != "lowpass":
        # flat: the same weight at every lag
        torch.testing.assert_close(kernel, kernel[:, :1].expand_as(kernel))
        assert reach == pytest.approx(1.0, rel=1e-9)
    else:
        torch.testing.assert_close(
            kernel[:, 1:] / kernel[:, :-1],
            torch.full((2, n - 1), math.exp(-0.5), dtype=torch.float64),
        )
        assert reach < 1e-8


def test_a_causal_start_is_checked_and_survives_regrid():
    with pytest.raises(ValueError, match="start='ramp'; expected one of"):
        ConcentrationMixer(4, "16", num_heads=2, causal_axes=(0,), start="ramp")
    with pytest.raises(ValueError, match="MixerConfig start='ramp'"):
        MixerConfig(causal_axes=(0,), start="ramp")
    mixer_kwargs = MixerConfig(start="global").mixer_kwargs()
    layer = BUILTIN["concentration"].layer(Grid((16,)), causal_axes=(0,), **mixer_kwargs)(
        4, num_heads=2
    )
    assert layer.axis_factors[0].start == "global"
    assert layer.regrid("32").axis_factors[0].start == "global"


@pytest.mark.parametrize("branch", [2, 8])
def test_stages_of_several_sub_blocks_and_rows_split_over_chunks_equal_the_dense_reference(
    branch, monkeypatch
):
    # a chunk of one row: every row on its own
    monkeypatch.setattr("gridmix.mixers.concentration.ops.causal.CHUNK", 64)
    torch.manual_seed(2)
    x = torch.randn(3, 300, 2, 3, dtype=torch.float64, requires_grad=True)
    kernel = torch.rand(2, 260, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(x.shape, dtype=torch.float64)
    fast = causal_mode_product(x, kernel, 1, leaf=4, branch=branch)  # 512 = 4 · 2^7: several stages
    reference = causal_mode_product_dense(x, kernel, 1)
    torch.testing.assert_close(fast, reference, rtol=1e-12, atol=1e-12)
    for got, expected in zip(
        torch.autograd.grad(fast, (x, kernel), grad),
        torch.autograd.grad(reference, (x, kernel), grad),
    ):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
