"""The native Householder basis (``gridmix.mixers.concentration.ops.householder_native``): equal to
torch's map in float64, values and gradients, with and without the DCT, in every build the host can
run (``kernel_build``); used for float32 bases on the CPU up to a size, and not where a dispatch
mode watches, ``torch.compile`` traces, or the switch is off. Where a C compiler exists the kernels
must build (tests/test_native_build.py), so nothing here is skipped for want of it."""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from gridmix import ConcentrationMixer
from gridmix.mixers.concentration.factors import (
    _OrthogonalColumns,
    dct_basis,
    orthogonal_columns,
    wy_constants,
)
from gridmix.mixers.concentration.ops.householder_native import (
    MAX_BASIS_FLOATS,
    NativeOrthogonalColumns,
)
from gridmix.mixers.switches import set_native
from tests.test_tucker_native import assert_close_to_scale

pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler on PATH"
)

SHAPES = [  # (bases together k, modes m, rank r, axis length n or None for no DCT)
    (2, 64, 16, 64),  # a 64x64 grid's two bases: whole vectors at every width
    (3, 30, 5, 40),  # m not a multiple of any width (scalar tails), n > m
    (1, 24, 6, None),  # no DCT (the FFT form's bases): Q itself
    (2, 37, 19, None),  # r beyond 16 lanes, odd m
    (1, 7, 7, 7),  # square: the last reflector has no rows below its diagonal
    (1, 5, 1, 9),  # rank 1
]


def _weights(k: int, m: int, r: int, seed: int = 0) -> torch.Tensor:
    """(k, m, r) float64: column signs ±1 on the diagonal (both signs), reflectors of either sign
    below it."""
    torch.manual_seed(seed)
    w = 0.4 * torch.randn(k, m, r, dtype=torch.float64)
    signs = torch.where(torch.rand(k, r) < 0.5, -1.0, 1.0).to(torch.float64)
    w.diagonal(dim1=-2, dim2=-1).copy_(signs)
    return w


def _bases_and_grads(apply, weights, upstream):
    weights = [w.detach().requires_grad_() for w in weights]
    bases = apply(*weights)
    grads = torch.autograd.grad(sum((b * g).sum() for b, g in zip(bases, upstream)), weights)
    return torch.stack(bases), torch.stack(grads)


@pytest.mark.parametrize("k,m,r,n", SHAPES)
def test_values_and_gradients_equal_torchs_map_in_float64(kernel_build, k, m, r, n):
    w = _weights(k, m, r)
    dct = dct_basis(n, m, dtype=torch.float64) if n else None
    torch.manual_seed(1)
    upstream = torch.randn(k, n or m, r, dtype=torch.float64)
    constants = wy_constants(m, r, dtype=torch.float64)
    want, want_grad = _bases_and_grads(
        lambda *ws: _OrthogonalColumns.apply(dct, constants, True, *ws), w.unbind(), upstream
    )
    got, got_grad = _bases_and_grads(
        lambda *ws: NativeOrthogonalColumns.apply(None if dct is None else dct.float(), *ws),
        w.float().unbind(),
        upstream.float().unbind(),
    )
    assert_close_to_scale(got, want, 2e-6)
    assert_close_to_scale(got_grad, want_grad, 2e-5)
    # the diagonal (signs) and above are not parameters
    assert torch.count_nonzero(got_grad.triu()) == 0


def test_a_mixers_float32_bases_take_the_kernel_unless_switched_off_watched_or_compiled(
    monkeypatch,
):
    factor = ConcentrationMixer(8, "24", num_heads=2, rank=6).axis_factors[0]

    def backward_name():
        return type(orthogonal_columns(factor.rotation, dct=factor.dct)[0].grad_fn).__name__

    assert backward_name() == "NativeOrthogonalColumnsBackward"
    assert (
        type(orthogonal_columns(factor.rotation.double())[0].grad_fn).__name__
        == "_OrthogonalColumnsBackward"
    )
    factor.float()
    set_native(False)
    try:
        assert backward_name() == "_OrthogonalColumnsBackward"
    finally:
        set_native(None)
    with FlopCounterMode(display=False):  # a dispatch mode counts what runs: the torch ops
        assert backward_name() == "_OrthogonalColumnsBackward"
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert backward_name() == "_OrthogonalColumnsBackward"


def test_bases_beyond_the_size_limit_take_the_torch_ops():
    def backward_name(length, rank):
        factor = ConcentrationMixer(8, str(length), num_heads=2, rank=rank).axis_factors[0]
        return type(orthogonal_columns(factor.rotation, dct=factor.dct)[0].grad_fn).__name__

    # m·r at the limit
    assert backward_name(MAX_BASIS_FLOATS // 16, 16) == "NativeOrthogonalColumnsBackward"
    assert backward_name(MAX_BASIS_FLOATS // 16 + 1, 16) == "_OrthogonalColumnsBackward"


def test_the_mixers_gradients_agree_with_the_kernel_on_and_off():
    torch.manual_seed(0)
    mixer = ConcentrationMixer(16, "20x12", num_heads=2, rank=5)
    with torch.no_grad():
        for name, p in mixer.named_parameters():
            if name.endswith("original"):
                p.add_(0.3 * torch.randn_like(p).tril(-1))
    x = torch.randn(2, 20 * 12, 16)  # (B, N, C), the grid row-major
    params = [p for name, p in mixer.named_parameters() if name.endswith("original")]

    def grads():
        return torch.autograd.grad(mixer(x).square().sum(), params)

    on = grads()
    set_native(False)
    try:
        off = grads()
    finally:
        set_native(None)
    for got, want in zip(on, off):
        assert_close_to_scale(got, want.double(), 1e-4)
