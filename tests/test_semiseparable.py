"""The semiseparable causal factor: its chunked scan equals the dense Toeplitz of its kernel, is exactly causal,
keeps the certificate, and is a mixer option that leaves the default alone."""

from __future__ import annotations

import pytest
import torch

from gridmix.causal import causal_mode_product_dense
from gridmix.factors import SemiseparableFactor
from gridmix.semiseparable import semiseparable_kernel, semiseparable_mode_product

SHAPES = [  # (x shape (…, h, c), causal axis)
    ((2, 100, 3, 4), 1),  # 1-D, n not a multiple of the chunk
    ((2, 5, 37, 3, 4), 2),  # 2-D, causal last axis
    ((2, 37, 5, 3, 4), 1),  # 2-D, causal first axis
    ((2, 7, 9, 6, 2, 3), 1),  # 3-D: causal time, two other axes
    ((1, 1, 2, 3), 1),  # a single step
    ((2, 700, 2, 3), 1),  # with chunk 4: 175 chunks, three levels of the carry
]


def _parameters(heads: int, terms: int, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ``(log λ, w)`` (h, r) with decays from fast to near 1, as leaves that take gradients."""
    log_decays = -torch.exp(torch.randn(heads, terms, dtype=dtype) * 2 - 2)  # λ from ~0.99 to ~0.01
    weights = torch.randn(heads, terms, dtype=dtype)  # either sign: the op needs no positivity
    return log_decays.requires_grad_(), weights.requires_grad_()


@pytest.mark.parametrize("chunk,group", [(4, 2), (32, 16), (5, 3)])
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_values_and_gradients_equal_the_dense_toeplitz_of_the_kernel_in_float64(shape, axis, chunk, group):
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    log_decays, weights = _parameters(shape[-2], 3)
    grad = torch.randn(shape, dtype=torch.float64)
    fast = semiseparable_mode_product(x, log_decays, weights, axis, chunk=chunk, group=group)
    reference = causal_mode_product_dense(x, semiseparable_kernel(log_decays, weights, shape[axis]), axis)
    torch.testing.assert_close(fast, reference, rtol=1e-11, atol=1e-12)
    leaves = (x, log_decays, weights)
    for got, expected in zip(torch.autograd.grad(fast, leaves, grad), torch.autograd.grad(reference, leaves, grad)):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-11)


def test_the_kernel_is_the_sum_of_exponentials():
    log_decays, weights = torch.log(torch.tensor([[0.5, 0.25]], dtype=torch.float64)), torch.tensor([[2.0, -1.0]])
    expected = torch.tensor([[2 * 0.5**k - 0.25**k for k in range(5)]], dtype=torch.float64)
    torch.testing.assert_close(semiseparable_kernel(log_decays, weights.double(), 5), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_future_inputs_get_exactly_zero_gradient_and_do_not_move_the_past(dtype):
    torch.manual_seed(1)
    n, t = 1000, 400  # t inside a chunk, a group and a group of groups
    x = torch.randn(2, n, 2, 3, dtype=dtype, requires_grad=True)
    factor = SemiseparableFactor(length=n, terms=4, num_heads=2, start="global").to(dtype)
    with torch.no_grad():
        factor.decay_logits.add_(torch.randn_like(factor.decay_logits))
    out = factor.mode_product(x, 1)
    grad = torch.autograd.grad(out[:, : t + 1].sum(), x)[0]  # (2, n, 2, 3): a loss on positions ≤ t
    moved = factor.mode_product(torch.cat([x[:, : t + 1], 1e3 * torch.randn(2, n - t - 1, 2, 3, dtype=dtype)], 1), 1)
    assert grad[:, t + 1 :].abs().max().item() == 0.0 and grad[:, : t + 1].abs().min() > 0
    assert torch.equal(moved[:, : t + 1], out[:, : t + 1])


@pytest.mark.parametrize("start", ["lowpass", "global"])
def test_the_capped_factor_is_certified_and_the_uncapped_one_is_not(start):
    torch.manual_seed(2)
    capped = SemiseparableFactor(length=60, terms=5, num_heads=3, start=start).double()
    uncapped = SemiseparableFactor(length=60, terms=5, num_heads=3, start=start, capped=False).double()
    torch.testing.assert_close(uncapped.kernel(), capped.kernel())  # the same start: they differ in the cap alone
    with torch.no_grad():
        for factor in (capped, uncapped):
            factor.decay_logits.normal_(0.0, 3.0)
            factor.weight_logits.normal_(0.0, 3.0)
            factor.gain_logit.fill_(6.0)
    for factor in (capped, uncapped):
        kernel = factor.kernel()  # (h, n)
        assert (kernel >= 0).all()
        torch.testing.assert_close(kernel.sum(-1), factor.bound(), rtol=1e-6, atol=0)
        norms = torch.linalg.matrix_norm(factor.dense(), ord=2)  # (h,)
        assert (norms <= factor.bound() + 1e-12).all()
    assert (capped.bound() < 1).all() and (uncapped.bound() > 6).all()
    assert (torch.linalg.matrix_norm(uncapped.dense(), ord=2) > 1).all()  # no certificate without the cap


def test_float32_keeps_the_certificate_and_matches_float64():
    factor = SemiseparableFactor(length=5000, terms=16, num_heads=2, start="global")
    torch.testing.assert_close(factor.kernel().sum(-1), factor.bound(), rtol=1e-6, atol=0)
    x = torch.randn(2, 5000, 2, 3)
    torch.testing.assert_close(factor.mode_product(x, 1), factor.double().mode_product(x.double(), 1).float(),
                               rtol=1e-4, atol=1e-5)


def test_starts_lowpass_decays_and_global_is_near_flat():
    lowpass = SemiseparableFactor(length=64, terms=16, num_heads=1, start="lowpass").double().kernel()[0]
    flat = SemiseparableFactor(length=64, terms=16, num_heads=1, start="global").double().kernel()[0]
    assert lowpass[40] / lowpass[0] < 1e-3 and (lowpass[1:] < lowpass[:-1]).all()
    assert flat[-1] / flat[0] > 0.8 and (flat[1:] < flat[:-1]).all()


def test_autocast_computes_in_float32_and_returns_the_input_dtype():
    torch.manual_seed(3)
    factor = SemiseparableFactor(length=70, terms=4, num_heads=2)
    x = torch.randn(2, 70, 2, 3)
    plain = factor.mode_product(x, 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = factor.mode_product(x, 1)
    assert inside.dtype == torch.float32 and torch.equal(inside, plain)
    half = factor.mode_product(x.bfloat16(), 1)
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.float(), factor.mode_product(x.bfloat16().float(), 1).bfloat16().float())


def test_bad_arguments_name_the_values():
    x, log_decays, weights = torch.randn(1, 4, 2, 3), -torch.ones(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"log_decays \(2, 3\) and weights \(2, 4\)"):
        semiseparable_mode_product(x, log_decays, torch.ones(2, 4), 1)
    with pytest.raises(ValueError, match="axis=3"):
        semiseparable_mode_product(x, log_decays, weights, 3)
    with pytest.raises(ValueError, match="group=1"):
        semiseparable_mode_product(x, log_decays, weights, 1, group=1)
