"""The Hyena mixer against its float64 reference, the dense convolution of the filter written out
lag by lag from its parameters (values and gradients, 1-d to 3-d grids, causal and not), plus
causality, prefix tokens, resolution change and the refusals."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from gridmix.mixers.hyena import HyenaMixer, build_hyena, regrid_hyena
from tests.test_mixer_mamba import assert_matches_reference, short_conv_reference

pytestmark = pytest.mark.usefixtures("one_thread")

CASES = [
    ((7,), ()),
    ((7,), (0,)),
    ((4, 5), ()),
    ((4, 5), (1,)),
    ((3, 4), (0, 1)),
    ((2, 3, 4), ()),
    ((2, 3, 4), (0,)),
]


def filter_at(m: HyenaMixer, lag: tuple[int, ...]) -> torch.Tensor:
    """The filter at one lag vector, from the documented formula: features of ``t_k = l_k / n_k``,
    the MLP with sine activations, the window ``exp(−δ Σ|t_k|)``: (C,)."""
    f = m.filter
    t = torch.tensor([lag_k / n for lag_k, n in zip(lag, m.grid)], dtype=torch.float64)
    bands = torch.arange(1, f.bands + 1, dtype=torch.float64)
    features = torch.cat(
        [
            torch.cat([tk[None], (math.pi * bands * tk).cos(), (math.pi * bands * tk).sin()])
            for tk in t
        ]
    )
    lin1, sin1, lin2, sin2, lin3 = f.mlp
    h = torch.sin(sin1.freq * (lin1.weight @ features + lin1.bias))
    h = torch.sin(sin2.freq * (lin2.weight @ h + lin2.bias))
    return (lin3.weight @ h) * torch.exp(-t.abs().sum() * f.decay)


def hyena_reference(m: HyenaMixer, x: torch.Tensor) -> torch.Tensor:
    """The mixer from its parameters with the long convolution as a dense sum over every pair of
    grid positions (zero at a later position along a causal axis)."""
    grid, P, C = m.grid.shape, m.num_prefix_tokens, m.dim
    Bsz = x.shape[0]
    u = x[:, P:].reshape(Bsz, *grid, C)
    streams = short_conv_reference(
        u @ m.in_proj.weight.T + m.in_proj.bias, m.conv.weight, m.conv.bias, m.causal_axes
    )
    x0, x1, v = streams.split(C, dim=-1)
    w = (x1 * v).reshape(Bsz, -1, C)
    points = list(itertools.product(*(range(n) for n in grid)))
    rows = []
    for out in points:
        total = torch.zeros(Bsz, C, dtype=torch.float64)
        for j, inp in enumerate(points):
            lag = tuple(a - b for a, b in zip(out, inp))
            if any(lag[k] < 0 for k in m.causal_axes):
                continue
            total = total + filter_at(m, lag) * w[:, j]
        rows.append(total)
    conv = torch.stack(rows, dim=1)  # (B, N, C)
    y = x0.reshape(Bsz, -1, C) * (conv + w * m.skip)
    y = y @ m.out_proj.weight.T + m.out_proj.bias
    return torch.cat([x[:, :P], y], dim=1)


def tokens(grid, prefix=0, dim=4, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, prefix + math.prod(grid), dim, generator=g, dtype=torch.float64)


@pytest.mark.parametrize(("grid", "causal"), CASES)
def test_the_fft_convolution_is_the_dense_convolution_values_and_gradients(grid, causal):
    torch.manual_seed(0)
    m = HyenaMixer(
        4,
        grid,
        causal_axes=causal,
        num_prefix_tokens=1,
        bands=2,
        filter_width=8,
        dtype=torch.float64,
    )
    x = tokens(grid, prefix=1).requires_grad_(True)
    assert_matches_reference(m, x, hyena_reference)


@pytest.mark.parametrize(("grid", "causal"), [((16,), (0,)), ((6, 8), (0,)), ((3, 4, 6), (1, 2))])
def test_a_causal_axis_gives_a_later_token_no_gradient_beyond_fft_rounding(grid, causal):
    torch.manual_seed(0)
    m = HyenaMixer(8, grid, causal_axes=causal, dtype=torch.float64)
    x = tokens(grid, dim=8).requires_grad_(True)
    y = m(x).reshape(2, *grid, 8)
    for axis in causal:
        p = grid[axis] // 2
        y.narrow(axis + 1, 0, p + 1).sum().backward(retain_graph=True)
        g = x.grad.reshape(2, *grid, 8)
        later = g.narrow(axis + 1, p + 1, grid[axis] - p - 1)
        assert later.abs().max() < 1e-12 * g.abs().max()
        x.grad = None


def test_the_filter_is_zero_at_negative_lags_of_a_causal_axis_and_at_the_padding():
    m = HyenaMixer(4, "3x4", causal_axes=(0,))
    kernel = m.filter(m.grid, m.causal_axes, torch.float64)  # (6, 8, 4)
    assert kernel.shape == (6, 8, 4)
    assert torch.equal(kernel[3:], torch.zeros_like(kernel[3:]))  # axis 0: index 3, lags −2, −1
    assert torch.equal(kernel[:, 4], torch.zeros_like(kernel[:, 4]))  # axis 1: the unused index
    assert kernel[:3, 5:].abs().min() > 0  # axis 1 is symmetric: its negative lags are used


def test_prefix_tokens_pass_unchanged_and_the_grid_does_not_see_them():
    m = HyenaMixer(4, "3x4", num_prefix_tokens=2, dtype=torch.float64)
    x = tokens((3, 4), prefix=2)
    y = m(x)
    changed = x.clone()
    changed[:, :2] += 1.0
    assert torch.equal(y[:, :2], x[:, :2]) and torch.equal(m(changed)[:, 2:], y[:, 2:])


def test_on_another_grid_the_filter_is_evaluated_at_the_new_positions():
    torch.manual_seed(0)
    m = HyenaMixer(4, "4x6", causal_axes=(0,), dtype=torch.float64)
    assert torch.equal(regrid_hyena(m, "4x6")(tokens((4, 6))), m(tokens((4, 6))))
    moved = m.regrid("8x12")
    # the lag (2, 3) on 8x12 is at the positions of the lag (1, 1.5) on 4x6: t = (0.25, 0.25)
    kernel = moved.filter(moved.grid, moved.causal_axes, torch.float64)
    torch.testing.assert_close(kernel[2, 3], filter_at(moved, (2, 3)))
    torch.testing.assert_close(kernel[2, 2 * 12 - 3], filter_at(m, (1, -1.5)))
    with pytest.raises(ValueError, match="cannot regrid the 2-d Hyena mixer on 4x6 to the 1-d"):
        regrid_hyena(m, "24")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(bands=0), "bands=0; expected a positive integer"),
        (dict(causal_axes=(2,)), "causal axis 2 for the 2-d grid 3x4"),
        (dict(num_prefix_tokens=-1), "num_prefix_tokens=-1; expected an integer"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_hyena(8, "3x4", num_heads=2, **kwargs)
