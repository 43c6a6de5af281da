"""Compute ops of one concentration layer's forward+backward on the torch-op path, the path a GPU
runs (about one kernel per op): pinned per grid by :func:`gridmix.analysis.measure.count_ops`, and
the counter itself checked on layers whose ops are known. docs/benchmarks.md, "Compute ops per
layer", lists the counts (``python benchmarks/op_counts.py``)."""

from pathlib import Path

import pytest
import torch
from torch import nn

from gridmix import ConcentrationMixer, Grid
from gridmix.analysis.measure import count_ops
from gridmix.mixers import switches
from gridmix.mixers.concentration.factors import symmetric_bases

# name: (grid, the mixer's keyword arguments, the most compute ops of its forward+backward)
BOUNDS = {
    "1-d 256": ("256", {}, 49),
    "2-d 16x16": ("16x16", {}, 50),
    "3-d 4x8x8": ("4x8x8", {}, 82),
    "1-d causal 256": ("256", dict(causal_axes=(0,)), 77),
    "2-d 16x16, axis 0 causal": ("16x16", dict(causal_axes=(0,)), 78),
}


@pytest.mark.parametrize("name", BOUNDS)
def test_a_layers_forward_and_backward_stay_within_their_op_count(name):
    grid, kwargs, bound = BOUNDS[name]
    torch.manual_seed(0)
    mixer = ConcentrationMixer(64, grid, num_heads=4, rank=16, **kwargs).train()
    x = torch.randn(2, Grid.parse(grid).numel, 64, requires_grad=True)  # (B, N, C)
    count = count_ops(mixer, x)
    assert count.total <= bound, f"{name}: {count.to_dict()}"
    # aten ops only: the fused native kernels (gridmix's own ops) were switched off
    assert all(op.startswith("aten.") for op in [*count.forward, *count.backward]), count


def test_a_linear_layer_counts_its_three_products_and_the_bias_sum():
    layer = nn.Linear(4, 3)
    count = count_ops(layer, torch.randn(5, 4, requires_grad=True))
    assert count.forward == {"aten.addmm": 1}
    # ∂x = ḡ W, ∂W = ḡᵀ x, ∂b = Σ ḡ: each gradient already in its parameter's layout
    assert count.backward == {"aten.mm": 2, "aten.sum": 1}
    assert count.total == 4


class _Views(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(2, 6).t().unsqueeze(0).expand(3, 6, 2)[1]  # views only: no arithmetic


def test_views_and_allocations_are_not_compute_but_copies_are():
    x = torch.randn(3, 4, requires_grad=True)
    assert count_ops(_Views(), x, backward=False).forward == {}
    copy = nn.Sequential(_Views(), nn.Flatten(0))  # a transposed view flattened: one copy
    assert count_ops(copy, x, backward=False).forward == {"aten.clone": 1}


def test_the_count_leaves_the_native_switch_and_the_gradients_as_they_were():
    mixer = ConcentrationMixer(8, "4x4", num_heads=2, rank=2)
    x = torch.randn(1, 16, 8, requires_grad=True)
    held = torch.ones_like(x)
    x.grad = held
    for choice in (True, None):
        switches.set_native(choice)
        try:
            count_ops(mixer, x)
            assert switches._NATIVE.choice is choice
        finally:
            switches.set_native(None)
    assert x.grad is held and all(p.grad is None for p in mixer.parameters())


def test_the_mixers_bases_leave_the_column_signs_out_and_give_the_same_factor_bit_for_bit():
    torch.manual_seed(0)
    mixer = ConcentrationMixer(8, "12x12", num_heads=2, rank=6)
    (factor, _) = mixer.axis_factors
    with torch.no_grad():  # a rotation whose diagonal (the column signs) is half negative
        weight = factor.rotation.parametrizations.weight.original
        weight.copy_(torch.randn_like(weight))
        weight.diagonal().copy_(torch.tensor([1.0, -1.0] * 3))
    with switches.native_switched_off():
        (signed,) = symmetric_bases([factor])
        (unsigned,) = symmetric_bases([factor], signed=False)
    # U = D Q with torch's map for Q, signs included
    assert torch.allclose(signed, factor.dct @ factor.rotation.weight, atol=1e-6)
    assert torch.equal(unsigned, signed * torch.tensor([1.0, -1.0] * 3))
    lam = factor.eigenvalues()[0]
    assert torch.equal((signed * lam) @ signed.T, (unsigned * lam) @ unsigned.T)


def test_the_compiled_count_reads_a_linear_layers_three_gemms_and_its_fused_bias_sum(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from op_counts import compiled_kernels

    layer = nn.Linear(4, 3)
    kinds = compiled_kernels(layer, torch.randn(5, 4, requires_grad=True))
    # addmm forward; ∂x and ∂W are GEMMs (library calls), ∂b = Σ ḡ a kernel inductor writes
    assert kinds == {"library": 3, "fused": 1}
