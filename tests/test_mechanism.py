"""Mechanism analysis agrees with independent recomputation: dense SVDs, the dense operator, dense
Jacobians."""

import copy
import json

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from gridmix import ConcentrationMixer, mixer_layer
from gridmix.mixers.concentration.mechanism import (
    block_lipschitz,
    combine_signatures,
    mechanism_signature,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


SEED_KEYS = {
    "factor_largest_singular_values",
    "predicted_factor_bound",
    "observed_max_factor_singular",
    "probe_norm_ratio_after_mixing",
    "confirmed",
}


def idea_vit(grid=(4, 6), *, causal_axes=(), depth=2, seed=0) -> VisionTransformer:
    torch.manual_seed(seed)
    layer = mixer_layer("concentration", grid, rank=2, causal_axes=causal_axes)
    model = VisionTransformer(
        img_size=grid,
        patch_size=1,
        in_chans=1,
        embed_dim=16,
        depth=depth,
        num_heads=2,
        num_classes=3,
        class_token=False,
        global_pool="avg",
        attn_layer=layer,
    )
    with torch.no_grad():  # move the factors off their initialisation, as training would
        for mixer in _mixers(model):
            for name, p in mixer.axis_factors.named_parameters():
                # The Householder reflectors sit strictly below the diagonal of `original`; its
                # diagonal holds the columns' signs, which gradients never change (torch's
                # orthogonal parametrisation).
                p.add_(
                    torch.randn_like(p).tril(-1)
                    if name.endswith("original")
                    else torch.randn_like(p)
                )
    return model


def _mixers(model):
    return [m for m in model.modules() if isinstance(m, ConcentrationMixer)]


def test_signature_keeps_the_seed_keys_and_matches_dense_svd_of_the_factors():
    model = idea_vit()
    signature = mechanism_signature(model, torch.randn(3, 1, 4, 6))
    assert SEED_KEYS <= set(signature) and signature["predicted_factor_bound"] == 1.0
    assert json.loads(json.dumps(signature)) == signature
    layers = signature["layers"]
    assert [layer["name"] for layer in layers] == ["blocks.0.attn", "blocks.1.attn"]
    assert [layer["block"] for layer in layers] == ["blocks.0", "blocks.1"]
    assert len(signature["factor_largest_singular_values"]) == 2 * 2  # layers x axes
    for layer, mixer in zip(layers, _mixers(model)):
        for axis, factor in zip(layer["axes"], mixer.axis_factors):
            dense = factor.dense().detach()  # (h, n, n)
            expected = torch.linalg.svdvals(dense.double())
            assert torch.allclose(
                torch.tensor(axis["singular_values"], dtype=torch.float64), expected, atol=1e-6
            )
            # PSD factor: its singular values are its eigenvalues sigmoid(θ), padded with zeros to
            # n.
            lam = torch.sigmoid(factor.theta.detach().double()).sort(dim=-1, descending=True).values
            reported = torch.tensor(axis["singular_values"], dtype=torch.float64)
            assert torch.allclose(
                torch.tensor(axis["largest"], dtype=torch.float64), lam[:, 0], rtol=1e-5
            )
            assert torch.allclose(reported[:, : lam.shape[1]], lam, rtol=1e-5)
            assert axis["respects_bound"] and axis["kind"] == "symmetric"
            # orthonormal U attains max λ
            assert axis["tightness"] == pytest.approx([1.0, 1.0], rel=1e-5)
    assert signature["observed_max_factor_singular"] == max(
        signature["factor_largest_singular_values"]
    )
    assert signature["confirmed"] is True


def test_certified_bound_covers_the_dense_operator_and_the_probe():
    model = idea_vit(causal_axes=(0,))
    signature = mechanism_signature(model, torch.randn(2, 1, 4, 6), seed=3)
    for layer, mixer in zip(signature["layers"], _mixers(model)):
        assert [axis["kind"] for axis in layer["axes"]] == ["causal", "symmetric"]
        op = mixer.operator().detach().double()  # (h, N, N)
        true_norm = torch.linalg.matrix_norm(op, ord=2)
        certified = torch.tensor(layer["certified_operator_bound"], dtype=torch.float64)
        assert torch.all(true_norm <= certified * (1 + 1e-6))
        assert 0 < layer["probe_norm_ratio"] <= float(certified.max()) * (1 + 1e-6)
        # The probe ratio recomputed with the dense operator, per head, on the same fixed-seed
        # probe.
        probe = torch.randn(1, 4, 6, 16, generator=torch.Generator().manual_seed(3)).double()
        heads = probe.reshape(24, 2, 8)  # (N, h, c)
        mixed = torch.einsum("hnm,mhc->nhc", op, heads)
        assert layer["probe_norm_ratio"] == pytest.approx(
            float(mixed.norm() / heads.norm()), rel=1e-5
        )
    assert signature["certified_operator_bound"] < 1.0


def test_lipschitz_of_a_linear_residual_block_is_its_two_norm():
    torch.manual_seed(0)
    linear = torch.nn.Linear(12, 12, bias=True)
    block = lambda x: x + linear(x)  # noqa: E731
    true = torch.linalg.matrix_norm(torch.eye(12) + linear.weight.detach(), ord=2)
    estimate = block_lipschitz(block, torch.randn(5, 7, 12), iterations=20, seed=1)
    assert estimate == pytest.approx(float(true), rel=0.01) and estimate <= float(true) * (1 + 1e-5)


def test_block_lipschitz_of_a_vit_block_matches_its_dense_jacobian():
    model = idea_vit(grid=(3, 4), depth=1).eval()
    x = torch.randn(1, 12, 16)  # one sample: the Jacobian is (12*16) x (12*16)
    jacobian = torch.autograd.functional.jacobian(model.blocks[0], x).reshape(12 * 16, 12 * 16)
    true = float(torch.linalg.matrix_norm(jacobian.double(), ord=2))
    assert block_lipschitz(model.blocks[0], x, iterations=60) == pytest.approx(true, rel=0.01)
    signature = mechanism_signature(model, torch.randn(2, 1, 3, 4))
    assert (
        signature["residual_block_lipschitz"]
        == signature["layers"][0]["residual_block_lipschitz"]
        > 0
    )


def test_analysis_restores_the_training_mode_and_rejects_a_model_without_mixer():
    model = idea_vit().train()
    mechanism_signature(model, torch.randn(2, 1, 4, 6))
    assert model.training
    with pytest.raises(ValueError, match="no ConcentrationMixer"):
        mechanism_signature(torch.nn.Linear(3, 3), torch.randn(2, 3))


def test_combined_signature_is_confirmed_only_if_every_seed_is():
    inputs = torch.randn(2, 1, 4, 6)
    per_seed = {seed: mechanism_signature(idea_vit(seed=seed), inputs) for seed in (0, 1)}
    combined = combine_signatures(per_seed)
    assert SEED_KEYS <= set(combined) and combined["confirmed"] and combined["n_seeds"] == 2
    assert [s["seed"] for s in combined["per_seed"]] == [0, 1]
    assert combined["observed_max_factor_singular"] == max(
        s["observed_max_factor_singular"] for s in per_seed.values()
    )
    broken = copy.deepcopy(per_seed)
    axis = broken[1]["layers"][1]["axes"][0]
    axis["largest"][0] = axis["bound"][0] * (1 + 1e-4)  # one factor of one seed above its bound
    assert not combine_signatures(broken)["confirmed"]
    within_rounding = copy.deepcopy(per_seed)
    axis = within_rounding[1]["layers"][0]["axes"][1]
    axis["largest"][0] = axis["bound"][0] * (1 + 1e-7)
    assert combine_signatures(within_rounding)["confirmed"]
    with pytest.raises(ValueError, match="empty"):
        combine_signatures({})


def test_spectra_plot_takes_one_seed_or_all(tmp_path):
    from gridmix.report.plots import plot_spectra

    inputs = torch.randn(2, 1, 4, 6)
    one = mechanism_signature(idea_vit(causal_axes=(0,)), inputs)
    for name, mechanism in (("one.png", one), ("all.png", combine_signatures({0: one, 1: one}))):
        assert plot_spectra(mechanism, tmp_path / name).read_bytes().startswith(b"\x89PNG")


def scaled_factor(monkeypatch, model, scale: float) -> None:
    """Make the first mixer's first factor ``scale`` times what its parameters give (its bound
    unchanged)."""
    factor = _mixers(model)[0].axis_factors[0]
    dense = factor.dense
    monkeypatch.setattr(factor, "dense", lambda: dense() * scale)


def test_float32_round_off_passes_the_certificate_check_and_a_real_violation_fails_it(monkeypatch):
    """Trained 32-wide factors sat up to 1.3e-6 above their bound by float32 round-off: that passes;
    1 % fails."""
    inputs = torch.randn(2, 1, 32, 8)
    model = idea_vit((32, 8))
    scaled_factor(monkeypatch, model, 1 + 1.3e-6)
    signature = mechanism_signature(model, inputs)
    assert signature["confirmed"]  # a fixed slack of 1e-6 failed it
    worst = signature["worst_factor"]
    assert worst["layer"] == "blocks.0.attn" and worst["axis"] == 0
    assert (
        1e-6
        < worst["excess"]
        < worst["rtol"]
        == pytest.approx(4 * 32 * torch.finfo(torch.float32).eps)
    )
    from gridmix.report.markdown import _certificate_words

    assert "within the float round-off slack 1.5e-05" in _certificate_words(signature)
    broken = idea_vit((32, 8))
    scaled_factor(monkeypatch, broken, 1.01)
    signature = mechanism_signature(broken, inputs)
    assert not signature["confirmed"] and signature["worst_factor"]["excess"] == pytest.approx(
        0.01, rel=1e-3
    )
    combined = combine_signatures({0: mechanism_signature(model, inputs), 1: signature})
    assert not combined["confirmed"] and combined["worst_factor"]["seed"] == 1


def test_the_report_says_which_factor_failed_and_what_it_was_compared_with(monkeypatch):
    from gridmix.report.markdown import _certificate_words

    model = idea_vit()
    scaled_factor(monkeypatch, model, 1.01)
    combined = combine_signatures({3: mechanism_signature(model, torch.randn(2, 1, 4, 6))})
    words = _certificate_words(combined)
    worst = combined["worst_factor"]
    assert words.startswith("**FAILED** — layer blocks.0.attn, axis 0, head ")
    assert (
        f"seed 3: its largest singular value {worst['largest']:.7g} vs its certified bound "
        f"{worst['bound']:.7g}"
        in words
        and "over by 0.01 relative, beyond the float round-off slack 1.9e-06" in words
    )  # 4 · 4 · eps
    passed = _certificate_words(
        combine_signatures({0: mechanism_signature(idea_vit(), torch.randn(2, 1, 4, 6))})
    )
    assert passed.startswith(
        "**passed** — every factor's largest singular value is within its certified bound"
    )
