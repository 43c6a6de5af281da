"""The mixer is constructible as timm's ``attn_layer`` and a ViT built with it learns."""

import torch
from timm.models.vision_transformer import VisionTransformer

from gridmix import ConcentrationMixer, mixer_layer


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
