"""The mechanism arms' layers: the uncapped ablation differs from the idea in the cap alone, the
no-mixing control mixes no tokens, and the certificate with prefix tokens bounds the whole token map
(built densely here)."""

import pytest
import torch
from timm.models.vision_transformer import Block

from gridmix import ConcentrationMixer, TokenwiseMixer
from gridmix.mixers.builtin import BUILTIN


def token_maps(mixer: torch.nn.Module, tokens: int) -> torch.Tensor:
    """The dense (P + N)² token map per channel, (C, T, T), with W_v = W_o = I: column j is the
    response to token j."""
    C = mixer.dim
    with torch.no_grad():
        for layer in (mixer.v, mixer.proj):
            layer.weight.copy_(torch.eye(C))
            if layer.bias is not None:
                layer.bias.zero_()
        basis = torch.eye(tokens)[:, :, None].expand(tokens, tokens, C)  # (T inputs, T tokens, C)
        out = mixer(basis.contiguous())  # (T inputs, T tokens, C): out[j, i, c] = T_c[i, j]
    return out.permute(2, 1, 0)  # (C, T, T)


@pytest.mark.parametrize("prefix_mode", ["mean", "identity"])
@pytest.mark.parametrize("causal", [(), (1,)])
def test_token_map_bound_covers_the_whole_map_with_prefix_tokens(prefix_mode, causal):
    mixer = ConcentrationMixer(
        4,
        "3x4",
        num_heads=2,
        rank=2,
        num_prefix_tokens=2,
        prefix_mode=prefix_mode,
        causal_axes=causal,
    )
    # a strongly contracting M: the grid-only certificate is tiny, the prefix block is not
    with torch.no_grad():
        for factor in mixer.axis_factors:
            for parameter in factor.parameters():
                if parameter.ndim <= 2 and parameter.shape[0] == 2:
                    parameter.fill_(-3.0)
    maps = token_maps(mixer, 2 + 12)  # (C, 14, 14)
    norms = torch.linalg.matrix_norm(maps.double(), ord=2)  # (C,)
    heads = torch.arange(4) // 2
    bound, grid_only = mixer.token_map_bound()[heads], mixer.spectral_bound()[heads]
    assert (norms <= bound.double() * (1 + 1e-5)).all(), (norms, bound)
    # the grid certificate alone does not bound the token map
    assert (norms > 10 * grid_only.double()).all()
    expected = 1.0 if prefix_mode == "identity" else 0.5
    # the prefix block's own norm: the bound is not loose by much
    assert norms.min() >= expected - 1e-6
    assert (bound - expected < 0.05).all()


def test_token_map_bound_without_prefix_is_the_spectral_bound():
    mixer = ConcentrationMixer(4, "4x4", num_heads=2, rank=2)
    norms = torch.linalg.matrix_norm(token_maps(mixer, 16).double(), ord=2)
    assert torch.equal(mixer.token_map_bound(), mixer.spectral_bound())
    assert (norms <= mixer.spectral_bound()[torch.arange(4) // 2].double() * (1 + 1e-5)).all()


@pytest.mark.parametrize("causal", [(), (0,)])
def test_uncapped_ablation_starts_as_the_idea_and_can_leave_the_unit_ball(causal):
    capped = ConcentrationMixer(8, "4x6", num_heads=2, rank=3, causal_axes=causal)
    uncapped = ConcentrationMixer(
        8, "4x6", num_heads=2, rank=3, causal_axes=causal, spectrum="uncapped"
    )
    # the same operator at initialisation
    torch.testing.assert_close(uncapped.operator(), capped.operator())
    # the same logits far up: the cap holds one below 1, the other goes past it
    with torch.no_grad():
        for mixer in (capped, uncapped):
            for factor in mixer.axis_factors:
                (factor.theta if hasattr(factor, "theta") else factor.gain_logit).fill_(3.0)
    assert capped.factor_bounds().max() < 1 < uncapped.factor_bounds().min()
    largest = torch.linalg.matrix_norm(uncapped.operator().double(), ord=2)
    assert (largest > 1).all() and (
        largest <= uncapped.factor_bounds().prod(0).double() * (1 + 1e-5)
    ).all()
    with pytest.raises(ValueError, match="no certificate"):
        uncapped.spectral_bound()
    with pytest.raises(ValueError, match="spectrum='free'"):
        ConcentrationMixer(8, "4x6", spectrum="free")


def test_tokenwise_control_mixes_no_tokens_and_drops_into_timm():
    layer = BUILTIN["tokenwise"].layer("4x4")
    block = Block(8, num_heads=2, qkv_bias=True, attn_layer=layer)
    assert isinstance(block.attn, TokenwiseMixer)
    x = torch.randn(2, 16, 8)
    bumped = x.clone()
    bumped[:, 5] += 1.0
    changed = (block.attn(bumped) - block.attn(x)).abs().sum(dim=(0, 2))  # (16,)
    assert changed[5] > 0 and torch.count_nonzero(changed) == 1
    torch.testing.assert_close(block.attn(x), block.attn.proj(block.attn.v(x)))
    assert block(x).shape == x.shape
    with pytest.raises(ValueError, match=r"expected \(B, 16 tokens, 8\)"):
        block.attn(torch.randn(2, 15, 8))


def test_tokenwise_takes_every_argument_of_the_concentration_mixer():
    # the control drops in wherever the idea does: every mixing argument is taken and ignored (the
    # semiseparable causal form's too), W_v and W_o follow the same arguments and defaults
    kwargs = dict(rank=2, causal_axes=(0,), causal_form="semiseparable", terms=4, qkv_bias=True)
    control = TokenwiseMixer(8, "4x6", num_heads=2, dtype=torch.float64, **kwargs)
    idea = ConcentrationMixer(8, "4x6", num_heads=2, dtype=torch.float64, **kwargs)
    assert control.v.bias is not None and control.v.weight.dtype == torch.float64
    assert control.proj_drop.p == idea.proj_drop.p == 0.0
    with pytest.raises(TypeError, match=r"unexpected arguments \['bogus'\]"):
        TokenwiseMixer(8, "4x6", bogus=1)
