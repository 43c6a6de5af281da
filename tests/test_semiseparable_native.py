"""The fused semiseparable recurrence (``gridmix.mixers.concentration.ops.semiseparable_native``):
equal to the dense Toeplitz of its kernel in float64, values and all three gradients, in every build
the host can run (``kernel_build``); exactly causal; independent of the thread count; counted,
compilable, and off with the native switch. Where a C compiler exists the kernel must build
(tests/test_native_build.py), so nothing here is skipped for want of it."""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from gridmix import ConcentrationMixer
from gridmix.mixers.concentration.ops.causal import causal_mode_product_dense
from gridmix.mixers.concentration.ops.semiseparable import (
    semiseparable_kernel,
    semiseparable_mode_product,
    torch_mode_product,
)
from gridmix.mixers.concentration.ops.semiseparable_native import (
    native_applies,
    semiseparable_scan,
    semiseparable_scan_backward,
)
from gridmix.mixers.switches import set_native

pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler on PATH"
)

SHAPES = [  # (x shape (…, h, c) with h·c a multiple of 16, causal axis, terms)
    (
        (3, 150, 2, 8),
        1,
        16,
    ),  # 1-D, the unrolled 16-term kernel, 150 = two blocks of 64 (BLOCK) and a short one
    (
        (2, 300, 4, 16),
        1,
        5,
    ),  # 1-D, the generic term loop, four tiles of 16 channels, five blocks, the last short
    ((2, 9, 7, 2, 8), 1, 8),  # 2-D, causal first axis: 7 · 16 lanes after it
    (
        (16, 70, 10, 2, 8),
        1,
        8,
    ),  # 16 rows before the axis, so an item has all 160 lanes: tile groups of up to 8
    ((2, 7, 9, 2, 8), 2, 4),  # 2-D, causal last axis
    (
        (2, 5, 4, 6, 2, 8),
        3,
        4,
    ),  # 3-D, causal last axis: 40 rows before it, so each work item takes several
    ((2, 5, 3, 4, 1, 16), 1, 3),  # 3-D, causal time
    ((1, 1, 1, 16), 1, 2),  # a single step
]


def _problem(shape, terms, seed=0):
    """float64 leaves x, log λ (λ from ~0.99 to ~0.01), w (either sign)."""
    torch.manual_seed(seed)
    heads = shape[-2]
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    log_decays = (
        -torch.exp(torch.randn(heads, terms, dtype=torch.float64) * 2 - 2)
    ).requires_grad_()
    weights = torch.randn(heads, terms, dtype=torch.float64, requires_grad=True)
    return x, log_decays, weights


def _float32(*tensors):
    return [t.detach().float().requires_grad_() for t in tensors]


@pytest.mark.parametrize("shape,axis,terms", SHAPES)
def test_values_and_gradients_equal_the_dense_toeplitz_in_float64(kernel_build, shape, axis, terms):
    x, log_decays, weights = _problem(shape, terms)
    reference = causal_mode_product_dense(
        x, semiseparable_kernel(log_decays, weights, shape[axis]), axis
    )
    grad = torch.randn_like(reference)
    expected = torch.autograd.grad(reference, [x, log_decays, weights], grad)
    x32, log32, w32 = _float32(x, log_decays, weights)
    assert native_applies(x32, terms)  # the fused kernel, not the torch-op fallback, is under test
    out = semiseparable_mode_product(x32, log32, w32, axis)
    got = torch.autograd.grad(out, [x32, log32, w32], grad.float())
    # float32 sums of up to 300 · 2r terms, to their scale
    for g, e in zip([out, *got], [reference, *expected]):
        scale = e.abs().max().clamp(min=1.0)  # ∂ log λ is exactly 0 for a single step (λ⁰)
        torch.testing.assert_close(g.double() / scale, e / scale, rtol=0, atol=1e-5)


def test_it_equals_the_torch_op_form_in_float32(kernel_build):
    x, log_decays, weights = _float32(*_problem((2, 130, 2, 8), 6))
    fused = semiseparable_mode_product(x, log_decays, weights, 1)
    chunked = torch_mode_product(x, log_decays, weights, 1)
    torch.testing.assert_close(fused, chunked, rtol=1e-5, atol=1e-5)


def test_future_inputs_get_exactly_zero_gradient_and_do_not_move_the_past(kernel_build):
    x, log_decays, weights = _float32(*_problem((2, 1000, 2, 8), 16, seed=1))
    t = 401  # inside a block of 64 positions (the kernel's BLOCK)
    out = semiseparable_mode_product(x, log_decays, weights, 1)
    grad = torch.autograd.grad(out[:, : t + 1].sum(), x)[0]  # a loss on positions ≤ t
    moved = semiseparable_mode_product(
        torch.cat([x[:, : t + 1], 1e3 * torch.randn(2, 1000 - t - 1, 2, 8)], 1),
        log_decays,
        weights,
        1,
    )
    assert grad[:, t + 1 :].abs().max().item() == 0.0 and grad[:, : t + 1].abs().min() > 0
    assert torch.equal(moved[:, : t + 1], out[:, : t + 1])


@pytest.mark.parametrize(
    "shape,axis", [((3, 200, 4, 16), 1), ((40, 30, 2, 8), 1)]
)  # 12 items; 16 of 2–3 rows
def test_results_do_not_depend_on_the_thread_count(kernel_build, shape, axis):
    x, log_decays, weights = _float32(*_problem(shape, 16, seed=2))
    grad = torch.randn(shape)
    runs = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            out = semiseparable_mode_product(x, log_decays, weights, axis)
            runs.append([out, *torch.autograd.grad(out, [x, log_decays, weights], grad)])
    finally:
        torch.set_num_threads(before)
    for run in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(run, runs[0]))


def test_autocast_computes_in_float32_and_returns_the_input_dtype():
    x, log_decays, weights = _float32(*_problem((2, 40, 2, 8), 4, seed=7))
    plain = semiseparable_mode_product(x, log_decays, weights, 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = semiseparable_mode_product(x, log_decays, weights, 1)
    assert inside.dtype == torch.float32 and torch.equal(inside, plain)
    half = semiseparable_mode_product(x.bfloat16(), log_decays, weights, 1)
    assert half.dtype == torch.bfloat16
    rounded_first = semiseparable_mode_product(x.bfloat16().float(), log_decays, weights, 1)
    torch.testing.assert_close(half, rounded_first.bfloat16())


def test_double_backward_runs_through_the_torch_op_form():
    # Linear in x: Jᵀu by a backward with create_graph, then J v = ∂⟨Jᵀu, v⟩/∂u = the scan of v.
    x, log_decays, weights = _float32(*_problem((2, 40, 2, 8), 4, seed=3))
    u = torch.randn(2, 40, 2, 8, requires_grad=True)
    (vjp,) = torch.autograd.grad(
        semiseparable_mode_product(x, log_decays, weights, 1), x, u, create_graph=True
    )
    v = torch.randn(2, 40, 2, 8)
    (jvp,) = torch.autograd.grad(vjp, u, v)
    torch.testing.assert_close(
        jvp, semiseparable_mode_product(v, log_decays, weights, 1), rtol=1e-5, atol=1e-5
    )


def test_ops_pass_opcheck_and_flops_are_counted():
    x, log_decays, weights = _float32(*_problem((2, 24, 2, 8), 5, seed=4))
    decays = torch.exp(log_decays.detach())
    torch.library.opcheck(semiseparable_scan, (x.detach(), decays, weights.detach(), 1))
    torch.library.opcheck(
        semiseparable_scan_backward, (torch.randn(x.shape), x.detach(), decays, weights.detach(), 1)
    )
    with FlopCounterMode(display=False) as counter:
        out = semiseparable_mode_product(x, log_decays, weights, 1)
        torch.autograd.grad(out.sum(), x)
    counts = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    assert counts["gridmix.semiseparable_scan"] == 4 * x.numel() * 5
    assert counts["gridmix.semiseparable_scan_backward"] == 10 * x.numel() * 5


def test_torch_compile_runs_the_kernel_and_matches_eager():
    x, log_decays, weights = _float32(*_problem((2, 30, 2, 8), 4, seed=5))
    # the fake kernels and autograd
    compiled = torch.compile(semiseparable_mode_product, backend="aot_eager")
    out = compiled(x, log_decays, weights, 1)
    torch.testing.assert_close(out, semiseparable_mode_product(x, log_decays, weights, 1))
    torch.testing.assert_close(
        torch.autograd.grad(out.sum(), x)[0],
        torch.autograd.grad(semiseparable_mode_product(x, log_decays, weights, 1).sum(), x)[0],
    )


def test_the_switch_and_unsupported_shapes_take_the_torch_op_form():
    x = torch.randn(2, 10, 2, 8)
    assert native_applies(x, 16)
    # float64; more terms than the kernel
    assert not native_applies(x.double(), 16) and not native_applies(x, 65)
    assert not native_applies(torch.randn(2, 10, 3, 4), 16)  # 12 channels: not a whole vector of 16
    set_native(False)
    try:
        assert not native_applies(x, 16)
        with FlopCounterMode(display=False) as counter:
            semiseparable_mode_product(x, *_float32(*_problem((2, 10, 2, 8), 4)[1:]), 1)
        assert "gridmix.semiseparable_scan" not in {
            str(op) for op in counter.get_flop_counts()["Global"]
        }
    finally:
        set_native(None)


def test_the_mixer_runs_the_kernel_on_its_causal_axis_and_equals_its_dense_operator():
    torch.manual_seed(6)
    mixer = ConcentrationMixer(
        32, "12x5", num_heads=2, rank=3, causal_axes=(0,), causal_form="semiseparable"
    )
    v = torch.randn(2, 12, 5, 32)
    with FlopCounterMode(display=False) as counter:
        out = mixer.mix(v)
    assert "gridmix.semiseparable_scan" in {str(op) for op in counter.get_flop_counts()["Global"]}
    reference = mixer.double().mix(v.double())  # float64: the torch-op form
    torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-5)
