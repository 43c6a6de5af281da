"""The short depthwise convolution of Hyena and Mamba: PyTorch's convolution on grids of rank 1 to
3 and the sum of shifted copies above rank 3 compute the same thing (values and gradients), and a
causal axis stays exactly causal on either path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gridmix.mixers.short_conv import ShortConv, shifted_sum


def padded_input(conv: ShortConv, u: torch.Tensor) -> torch.Tensor:
    """``u`` (B, *grid, C) zero-padded as the convolution pads it: (B, …, n_k + 2, …, C)."""
    pad = []
    for k in reversed(range(u.dim() - 2)):
        pad += [2, 0] if k in conv.causal_axes else [1, 1]
    return F.pad(u.movedim(-1, 1), pad).movedim(1, -1)


@pytest.mark.parametrize(
    ("grid", "causal"),
    [((7,), ()), ((7,), (0,)), ((4, 5), (1,)), ((3, 4, 5), ()), ((2, 3, 4), (0, 2))],
)
def test_the_convolution_is_the_sum_of_shifted_copies_values_and_gradients(grid, causal):
    torch.manual_seed(0)
    conv = ShortConv(6, len(grid), causal, dtype=torch.float64)
    u = torch.randn(2, *grid, 6, dtype=torch.float64, requires_grad=True)
    fast = conv(u)
    slow = shifted_sum(padded_input(conv, u), conv.weight, conv.bias)
    torch.testing.assert_close(fast, slow, rtol=1e-12, atol=1e-13)
    weight = torch.randn(fast.shape, dtype=torch.float64)
    params = [u, conv.weight, conv.bias]
    for a, b in zip(
        torch.autograd.grad((fast * weight).sum(), params),
        torch.autograd.grad((slow * weight).sum(), params),
    ):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)


def test_a_four_dimensional_grid_sums_shifted_copies_and_stays_causal():
    torch.manual_seed(0)
    conv = ShortConv(3, 4, (0,), dtype=torch.float64)
    u = torch.randn(1, 3, 2, 3, 2, 3, dtype=torch.float64, requires_grad=True)
    out = conv(u)  # (1, 3, 2, 3, 2, 3)
    assert out.shape == u.shape
    (grad,) = torch.autograd.grad(out[:, 1].sum(), u)  # outputs at step 1 of the causal axis
    assert grad[:, 2].abs().max() == 0  # step 2 never enters
    assert grad[:, :2].abs().max() > 0
