"""The mixer is constructible as timm's ``attn_layer`` and a ViT built with it learns."""

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from gridmix import ConcentrationMixer, Grid, mixer_layer
from gridmix.mixers.contract import token_count_error


def test_vit_with_mixer_builds_and_its_loss_falls():
    # Average pooling, as gridmix's tracks build it: with a class token the mixer would hand that
    # token only the grid mean (see the mixer's prefix_mode), a much weaker read-out than pooling
    # the tokens.
    torch.manual_seed(0)
    layer = mixer_layer("concentration", "8x8", rank=4)
    model = VisionTransformer(
        img_size=32,
        patch_size=4,
        embed_dim=32,
        depth=2,
        num_heads=4,
        num_classes=3,
        attn_layer=layer,
        class_token=False,
        global_pool="avg",
    )
    assert all(isinstance(block.attn, ConcentrationMixer) for block in model.blocks)
    assert model.blocks[0].attn.grid.shape == (8, 8) and model.blocks[0].attn.num_heads == 4
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 3, (16,))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def test_vit_with_class_and_register_tokens_runs():
    layer = mixer_layer("concentration", "4x4", rank=2, num_prefix_tokens=3)
    model = VisionTransformer(
        img_size=16,
        patch_size=4,
        embed_dim=16,
        depth=1,
        num_heads=2,
        num_classes=5,
        reg_tokens=2,
        attn_layer=layer,
    )
    assert model.num_prefix_tokens == 3
    assert model(torch.randn(2, 3, 16, 16)).shape == (2, 5)


def test_mixer_layer_keeps_its_binding_accepts_timm_arguments_and_tags_what_it_builds():
    layer = mixer_layer("concentration", (4, 6), rank=2, causal_axes=(0,))
    mixer = layer(12, num_heads=3, qkv_bias=True)
    assert mixer.grid.shape == (4, 6) and mixer.causal_axes == (0,) and mixer.v.bias is not None
    assert isinstance(mixer, ConcentrationMixer) and mixer.gridmix_mixer == "concentration"
    assert mixer_layer("concentration-uncapped", (4, 6))(12, num_heads=3).spectrum == "uncapped"


@pytest.mark.parametrize("mixer", ["concentration", "global-filter"])
def test_timm_default_class_token_is_refused_with_the_fix(mixer):
    # timm's ViT has class_token=True by default: one token more than a mixer built for no prefix
    # tokens expects; the error says so and how to fix it, for the idea and for a peer alike.
    layer = mixer_layer(mixer, "8x8")
    vit = VisionTransformer(
        img_size=32, patch_size=4, embed_dim=64, depth=1, num_heads=2, attn_layer=layer
    )
    with pytest.raises(ValueError) as error:
        vit(torch.randn(2, 3, 32, 32))
    assert str(error.value) == (
        "x has shape (2, 65, 64); expected (B, 0 prefix + 64 grid tokens = 64, 64); the model has "
        "1 prefix (class) token: build the mixer with num_prefix_tokens=1 or the ViT with "
        "class_token=False"
    )


def test_token_count_error_hints_only_when_tokens_beyond_the_grid_are_unaccounted():
    grid = Grid.parse("4x4")
    hint = token_count_error((2, 19, 8), prefix=1, grid=grid, dim=8)
    assert hint.endswith(
        "the model has 3 prefix (class) tokens: build the mixer with num_prefix_tokens=3 or the "
        "ViT with class_token=False and reg_tokens=0"
    )
    # too few tokens, or the right count with the wrong width: the shape alone, no hint
    for shape in [(2, 15, 8), (2, 17, 4)]:
        message = token_count_error(shape, prefix=1, grid=grid, dim=8)
        assert message.endswith("expected (B, 1 prefix + 16 grid tokens = 17, 8)"), message
