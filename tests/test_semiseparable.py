"""The semiseparable causal factor: its chunked scan equals the dense Toeplitz of its kernel, is
exactly causal, keeps the certificate, and is a mixer option that leaves the default alone."""

from __future__ import annotations

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from gridmix import ConcentrationMixer, Grid, mixer_layer
from gridmix.mixers.builtin import BUILTIN
from gridmix.mixers.concentration.factors import CausalFactor, SemiseparableFactor, SymmetricFactor
from gridmix.mixers.concentration.mechanism import mechanism_signature
from gridmix.mixers.concentration.ops.causal import causal_mode_product_dense
from gridmix.mixers.concentration.ops.semiseparable import (
    semiseparable_kernel,
    semiseparable_mode_product,
)
from gridmix.models import MixerConfig

SHAPES = [  # (x shape (…, h, c), causal axis)
    ((2, 100, 3, 4), 1),  # 1-D, n not a multiple of the chunk
    ((2, 5, 37, 3, 4), 2),  # 2-D, causal last axis
    ((2, 37, 5, 3, 4), 1),  # 2-D, causal first axis
    ((2, 7, 9, 6, 2, 3), 1),  # 3-D: causal time, two other axes
    ((1, 1, 2, 3), 1),  # a single step
    ((2, 700, 2, 3), 1),  # with chunk 4: 175 chunks, three levels of the carry
]


def _parameters(heads: int, terms: int, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ``(log λ, w)`` (h, r) with decays from fast to near 1, as leaves that take
    gradients."""
    log_decays = -torch.exp(torch.randn(heads, terms, dtype=dtype) * 2 - 2)  # λ from ~0.99 to ~0.01
    weights = torch.randn(heads, terms, dtype=dtype)  # either sign: the op needs no positivity
    return log_decays.requires_grad_(), weights.requires_grad_()


@pytest.mark.parametrize("chunk,group", [(4, 2), (32, 16), (5, 3)])
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_values_and_gradients_equal_the_dense_toeplitz_of_the_kernel_in_float64(
    shape, axis, chunk, group
):
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    log_decays, weights = _parameters(shape[-2], 3)
    grad = torch.randn(shape, dtype=torch.float64)
    fast = semiseparable_mode_product(x, log_decays, weights, axis, chunk=chunk, group=group)
    reference = causal_mode_product_dense(
        x, semiseparable_kernel(log_decays, weights, shape[axis]), axis
    )
    torch.testing.assert_close(fast, reference, rtol=1e-11, atol=1e-12)
    leaves = (x, log_decays, weights)
    for got, expected in zip(
        torch.autograd.grad(fast, leaves, grad), torch.autograd.grad(reference, leaves, grad)
    ):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-11)


def test_rows_split_into_pieces_equal_the_dense_reference():
    torch.manual_seed(8)
    x = torch.randn(5, 100, 2, 1, dtype=torch.float64, requires_grad=True)  # R = 5 rows
    log_decays, weights = _parameters(2, 3)
    grad = torch.randn(x.shape, dtype=torch.float64)
    fast = semiseparable_mode_product(
        x, log_decays, weights, 1, chunk=8, group=2, piece=2 * 2 * 104
    )  # 3 pieces
    reference = causal_mode_product_dense(x, semiseparable_kernel(log_decays, weights, 100), 1)
    torch.testing.assert_close(fast, reference, rtol=1e-11, atol=1e-12)
    leaves = (x, log_decays, weights)
    for got, expected in zip(
        torch.autograd.grad(fast, leaves, grad), torch.autograd.grad(reference, leaves, grad)
    ):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-11)


def test_the_kernel_is_the_sum_of_exponentials():
    log_decays, weights = (
        torch.log(torch.tensor([[0.5, 0.25]], dtype=torch.float64)),
        torch.tensor([[2.0, -1.0]]),
    )
    expected = torch.tensor([[2 * 0.5**k - 0.25**k for k in range(5)]], dtype=torch.float64)
    torch.testing.assert_close(semiseparable_kernel(log_decays, weights.double(), 5), expected)


@pytest.mark.parametrize(
    "chunk,group", [(64, 16), (4, 2)]
)  # the defaults; eight levels of the carry
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_future_inputs_get_exactly_zero_gradient_and_do_not_move_the_past(dtype, chunk, group):
    torch.manual_seed(1)
    n, t = 1000, 401  # t inside a chunk, a group and a group of groups
    x = torch.randn(2, n, 2, 3, dtype=dtype, requires_grad=True)
    factor = SemiseparableFactor(length=n, terms=4, num_heads=2, start="global").to(dtype)
    with torch.no_grad():
        factor.decay_logits.add_(torch.randn_like(factor.decay_logits))

    def apply(v: torch.Tensor) -> torch.Tensor:
        return semiseparable_mode_product(
            v, factor.log_decays(), factor.weights(), 1, chunk=chunk, group=group
        )

    out = apply(x)
    grad = torch.autograd.grad(out[:, : t + 1].sum(), x)[0]  # (2, n, 2, 3): a loss on positions ≤ t
    moved = apply(torch.cat([x[:, : t + 1], 1e3 * torch.randn(2, n - t - 1, 2, 3, dtype=dtype)], 1))
    assert grad[:, t + 1 :].abs().max().item() == 0.0 and grad[:, : t + 1].abs().min() > 0
    assert torch.equal(moved[:, : t + 1], out[:, : t + 1])


@pytest.mark.parametrize("start", ["lowpass", "global", "mean"])
def test_the_capped_factor_is_certified_and_the_uncapped_one_is_not(start):
    torch.manual_seed(2)
    capped = SemiseparableFactor(length=60, terms=5, num_heads=3, start=start).double()
    uncapped = SemiseparableFactor(
        length=60, terms=5, num_heads=3, start=start, capped=False
    ).double()
    # the same start: they differ in the cap alone
    torch.testing.assert_close(uncapped.kernel(), capped.kernel())
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
    # no certificate without the cap
    assert (torch.linalg.matrix_norm(uncapped.dense(), ord=2) > 1).all()


def test_float32_keeps_the_certificate_and_matches_float64():
    factor = SemiseparableFactor(length=5000, terms=16, num_heads=2, start="global")
    torch.testing.assert_close(factor.kernel().sum(-1), factor.bound(), rtol=1e-6, atol=0)
    x = torch.randn(2, 5000, 2, 3)
    torch.testing.assert_close(
        factor.mode_product(x, 1),
        factor.double().mode_product(x.double(), 1).float(),
        rtol=1e-4,
        atol=1e-5,
    )


def test_starts_lowpass_decays_and_global_is_near_flat():
    lowpass = (
        SemiseparableFactor(length=64, terms=16, num_heads=1, start="lowpass").double().kernel()[0]
    )
    flat = (
        SemiseparableFactor(length=64, terms=16, num_heads=1, start="global").double().kernel()[0]
    )
    assert lowpass[40] / lowpass[0] < 1e-3 and (lowpass[1:] < lowpass[:-1]).all()
    assert flat[-1] / flat[0] > 0.8 and (flat[1:] < flat[:-1]).all()
    mean = SemiseparableFactor(length=64, terms=16, num_heads=1, start="mean").double().kernel()[0]
    # the global shape, with the gain sigmoid(4)
    torch.testing.assert_close(mean / mean.sum(), flat / flat.sum())
    assert mean.sum().item() == pytest.approx(
        torch.sigmoid(torch.tensor(4.0, dtype=torch.float64)).item(), rel=1e-12
    )


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
    torch.testing.assert_close(
        half.float(), factor.mode_product(x.bfloat16().float(), 1).bfloat16().float()
    )


def test_bad_arguments_name_the_values():
    x, log_decays, weights = torch.randn(1, 4, 2, 3), -torch.ones(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"log_decays \(2, 3\) and weights \(2, 4\)"):
        semiseparable_mode_product(x, log_decays, torch.ones(2, 4), 1)
    with pytest.raises(ValueError, match="axis=3"):
        semiseparable_mode_product(x, log_decays, weights, 3)
    with pytest.raises(ValueError, match="group=1"):
        semiseparable_mode_product(x, log_decays, weights, 1, group=1)
    with pytest.raises(ValueError, match="piece=0"):
        semiseparable_mode_product(x, log_decays, weights, 1, piece=0)


def _perturbed(mixer: ConcentrationMixer) -> ConcentrationMixer:
    with torch.no_grad():
        for p in mixer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return mixer


@pytest.mark.parametrize(
    "grid,causal",
    [("300", (0,)), ("20x7", (0,)), ("6x5x40", (2,)), ("9x4x5", (0, 2)), ("5x6", (0, 1))],
)
def test_mixer_values_and_gradients_equal_its_dense_operator_in_float64(grid, causal):
    torch.manual_seed(4)
    mixer = _perturbed(
        ConcentrationMixer(
            4, grid, num_heads=2, rank=2, causal_axes=causal, causal_form="semiseparable", terms=3
        ).double()
    )
    assert all(isinstance(mixer.axis_factors[k], SemiseparableFactor) for k in causal)
    v = torch.randn(2, *mixer.grid, 4, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(v.shape, dtype=torch.float64)
    heads = v.reshape(2, mixer.grid.numel, 2, 2)  # (B, N, h, c)
    expected = torch.einsum("hij,bjhc->bihc", mixer.operator(), heads).reshape(v.shape)
    fast = mixer.mix(v)
    torch.testing.assert_close(fast, expected, rtol=1e-10, atol=1e-12)
    leaves = [v, *(p for name, p in mixer.named_parameters() if "axis_factors" in name)]
    for got, want in zip(
        torch.autograd.grad(fast, leaves, grad), torch.autograd.grad(expected, leaves, grad)
    ):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)


def test_mix_applies_the_scan_not_the_materialised_kernel(monkeypatch):
    mixer = ConcentrationMixer(
        8, "64x4", num_heads=2, rank=2, causal_axes=(0,), causal_form="semiseparable"
    )
    v = torch.randn(2, 64, 4, 8)
    expected = mixer.mix(v)

    def refuse(self):
        raise AssertionError("mix materialised the semiseparable kernel")

    monkeypatch.setattr(SemiseparableFactor, "kernel", refuse)
    torch.testing.assert_close(mixer.mix(v), expected, rtol=0, atol=0)


def test_mixer_is_exactly_causal_and_certified():
    torch.manual_seed(5)
    mixer = _perturbed(
        ConcentrationMixer(
            8,
            "200x3",
            num_heads=2,
            rank=2,
            causal_axes=(0,),
            causal_form="semiseparable",
            start="global",
        )
    )
    x = torch.randn(2, 200, 3, 8, requires_grad=True)
    t = 77
    grad = torch.autograd.grad(mixer.mix(x)[:, : t + 1].sum(), x)[0]  # (2, 200, 3, 8)
    assert (
        grad[:, t + 1 :].abs().max().item() == 0.0
        and grad[:, : t + 1].abs().sum((0, 2, 3)).min() > 0
    )
    bound = mixer.spectral_bound()  # (h,)
    assert (bound < 1).all()
    dense = mixer.double().operator()  # (h, N, N)
    assert (torch.linalg.matrix_norm(dense, ord=2) <= bound.double() + 1e-12).all()


def test_regrid_keeps_the_parameters_and_renormalises_the_kernel():
    torch.manual_seed(6)
    mixer = _perturbed(
        ConcentrationMixer(
            8, "32x4", num_heads=2, rank=2, causal_axes=(0,), causal_form="semiseparable", terms=5
        )
    ).double()
    for grid in ("16x4", "100x4"):
        other = mixer.regrid(grid)
        factor = other.axis_factors[0]
        assert isinstance(factor, SemiseparableFactor) and factor.length == int(grid.split("x")[0])
        for name, p in mixer.state_dict().items():
            assert torch.equal(other.state_dict()[name], p)
        # ‖κ‖₁ = gain on the new length too
        torch.testing.assert_close(factor.kernel().sum(-1), factor.bound())
        v = torch.randn(1, *other.grid, 8, dtype=torch.float64)
        heads = v.reshape(1, other.grid.numel, 2, 4)
        expected = torch.einsum("hij,bjhc->bihc", other.operator(), heads).reshape(v.shape)
        torch.testing.assert_close(other.mix(v), expected, rtol=1e-10, atol=1e-12)
    v = torch.randn(1, 32, 4, 8, dtype=torch.float64)
    torch.testing.assert_close(
        mixer.regrid("64x4").regrid("32x4").mix(v), mixer.mix(v), rtol=0, atol=0
    )


def test_the_default_is_the_toeplitz_factor_and_the_config_threads_the_argument():
    assert isinstance(
        ConcentrationMixer(4, "16", num_heads=2, causal_axes=(0,)).axis_factors[0], CausalFactor
    )
    assert MixerConfig().causal_form == "toeplitz"
    mixer_kwargs = MixerConfig(causal_form="semiseparable", terms=4, start="global").mixer_kwargs()
    layer = BUILTIN["concentration"].layer(Grid((16, 3)), causal_axes=(0,), **mixer_kwargs)(
        4, num_heads=2
    )
    factor = layer.axis_factors[0]
    assert (
        isinstance(factor, SemiseparableFactor) and factor.terms == 4 and factor.start == "global"
    )
    assert isinstance(layer.axis_factors[1], SymmetricFactor)
    mixer_kwargs = MixerConfig(causal_form="semiseparable").mixer_kwargs()
    uncapped = BUILTIN["concentration-uncapped"].layer(
        Grid((16,)), causal_axes=(0,), **mixer_kwargs
    )
    assert not uncapped(4, num_heads=2).axis_factors[0].capped


@pytest.mark.parametrize(
    "options,message",
    [
        (dict(causal_form="ssm"), "causal_form='ssm'; expected one of"),
        (dict(causal_form="semiseparable", terms=0), "terms=0; expected a positive integer"),
        (dict(causal_form="semiseparable", terms=2.5), "terms=2.5; expected a positive integer"),
        (
            dict(causal_form="semiseparable", modes=8),
            "modes=8 on semiseparable causal axis 0: .* expected None or 16",
        ),
    ],
)
def test_bad_argument_values_are_one_line_value_errors(options, message):
    with pytest.raises(ValueError, match=message):
        ConcentrationMixer(4, "16", num_heads=2, causal_axes=(0,), **options)


@pytest.mark.parametrize(
    "options,message",
    [
        (dict(causal_form="ssm"), "MixerConfig causal_form='ssm'; expected one of"),
        (dict(terms=-1), "MixerConfig terms=-1; expected a positive integer"),
    ],
)
def test_bad_config_values_are_value_errors(options, message):
    with pytest.raises(ValueError, match=message):
        MixerConfig(causal_axes=(0,), **options)


def test_mechanism_analysis_reports_a_semiseparable_axis_as_causal_and_certified():
    torch.manual_seed(7)
    layer = mixer_layer(
        "concentration", (4, 6), rank=2, causal_axes=(0,), causal_form="semiseparable", terms=3
    )
    model = VisionTransformer(
        img_size=(4, 6),
        patch_size=1,
        in_chans=1,
        embed_dim=16,
        depth=1,
        num_heads=2,
        num_classes=3,
        class_token=False,
        global_pool="avg",
        attn_layer=layer,
    )
    signature = mechanism_signature(model, torch.randn(2, 1, 4, 6))
    assert [axis["kind"] for axis in signature["layers"][0]["axes"]] == ["causal", "symmetric"]
    assert signature["confirmed"] is True
