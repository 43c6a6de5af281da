"""Every model of every built-in track trains; the idea and its matched baseline differ in the token
mixer only."""

import copy

import pytest
import torch
from gridmix_tracks.image import make_track as image_track
from gridmix_tracks.sequence import make_track as sequence_track
from gridmix_tracks.video import make_track as video_track
from timm.layers import PatchEmbed
from timm.models.vision_transformer import VisionTransformer
from torch.utils.flop_counter import FlopCounterMode

from gridmix import ConcentrationMixer
from gridmix.core.grid import Grid
from gridmix.mixers.builtin import BUILTIN
from gridmix.mixers.contract import MIXER_TAG
from gridmix.models import (
    BackboneConfig,
    GridTransformer,
    MixerConfig,
    build_mlp_mixer,
    mlp_mixer_supports,
)
from gridmix.tracks import DataSizes
from gridmix.tracks.plugin_loader import load_registry

TRACKS = [
    (sequence_track(), Grid((16,))),
    (image_track(), Grid((8, 8))),
    (video_track(), Grid((4, 4, 4))),
]
MODELS = [(track, grid, spec) for track, grid in TRACKS for spec in track.models]


@pytest.mark.parametrize("case", MODELS, ids=[f"{t.name}-{s.name}" for t, _, s in MODELS])
def test_every_model_trains_a_few_steps_with_falling_loss(case):
    track, grid, spec = case
    # fitting 8 samples: the loss must fall
    data = track.make_data(grid, 0, DataSizes(8, 2, 2)).train
    torch.manual_seed(0)
    model = spec.build(grid)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        loss = track.loss(model(data.inputs), data.targets)
        optimizer.zero_grad()
        loss.backward()
        # as gridmix.study.train does: unclipped, divided
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        # attention fitted the video samples to 0.014 nats, then spiked to 1.3 at step 40
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("case", MODELS, ids=[f"{t.name}-{s.name}" for t, _, s in MODELS])
def test_parameters_and_flops_are_countable(case):
    track, grid, spec = case
    model = spec.build(grid)
    inputs = track.make_data(grid, 0, DataSizes(2, 1, 1)).train.inputs
    with FlopCounterMode(display=False) as counter:
        model(inputs).sum().backward()
    assert sum(p.numel() for p in model.parameters()) > 0 and counter.get_total_flops() > 0


def mixer_paths(model):
    return {
        name for name, module in model.named_modules() if isinstance(module, ConcentrationMixer)
    }


@pytest.mark.parametrize(("track", "grid"), TRACKS, ids=[t.name for t, _ in TRACKS])
def test_idea_and_matched_baseline_differ_in_the_token_mixer_only(track, grid):
    idea, baseline = track.idea.build(grid), track.model(track.matched_baseline).build(grid)
    mixers = mixer_paths(idea)
    assert mixers and not mixer_paths(baseline)
    assert {name.rsplit(".", 1)[-1] for name in mixers} == {"attn"}

    def outside_mixers(model):
        return {
            name: (
                type(module).__name__,
                tuple((n, tuple(p.shape)) for n, p in module.named_parameters(recurse=False)),
            )
            for name, module in model.named_modules()
            if not any(name.startswith(m) for m in mixers)
        }

    assert outside_mixers(idea) == outside_mixers(baseline)
    assert type(idea) is type(baseline)
    for name in mixers:
        assert type(baseline.get_submodule(name)).__name__ == "Attention"


def test_image_idea_is_timm_vision_transformer_with_the_mixer_as_attn_layer():
    track = image_track()
    model = track.idea.build(Grid((8, 12)))
    assert (
        isinstance(model, VisionTransformer)
        and model.global_pool == "avg"
        and model.num_prefix_tokens == 0
    )
    assert all(
        isinstance(block.attn, ConcentrationMixer) and block.attn.grid.shape == (8, 12)
        for block in model.blocks
    )
    assert track.idea.width_kwarg == "mlp_ratio"
    wider = track.idea.build(Grid((8, 12)), mlp_ratio=4.0)
    assert sum(p.numel() for p in wider.parameters()) > sum(p.numel() for p in model.parameters())


def test_the_vits_residual_stream_is_contiguous_and_computes_what_timms_stock_vit_does():
    """Every norm of the image ViT reads contiguous tokens (timm's patch embedding hands out a
    transposed view, which each LayerNorm would copy back), and the same model with timm's stock
    patch embedding gives the same outputs and gradients bit for bit."""
    track = image_track()
    torch.manual_seed(0)
    model = track.model("vit").build(Grid((8, 12)))
    stock = copy.deepcopy(model)
    stock.patch_embed.__class__ = PatchEmbed  # timm's forward: the transposed view
    layouts = []
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.register_forward_pre_hook(lambda _, a: layouts.append(a[0].is_contiguous()))
    x = torch.randn(3, 1, 8, 12)  # (B, C_in, H, W)
    y, y_stock = model(x), stock(x)
    assert layouts and all(layouts), layouts
    assert torch.equal(y, y_stock)
    y.square().sum().backward()
    y_stock.square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), stock.parameters()):
        assert torch.equal(p.grad, q.grad), name


def test_mlp_mixer_refuses_grids_beyond_its_dense_token_mlp():
    assert mlp_mixer_supports(Grid((64, 64))) is None
    reason = mlp_mixer_supports(Grid((65, 64)))
    assert "dense in N = 4160 tokens (> 4096)" in reason
    assert image_track().model("mlp-mixer").supports(Grid((128, 128))) is not None
    with pytest.raises(ValueError, match="4160"):
        build_mlp_mixer(Grid((65, 64)), in_chans=1, num_outputs=2, backbone=BackboneConfig())


def test_video_mixer_time_axis_is_symmetric_for_clip_classification():
    model = video_track().idea.build(Grid((4, 4, 4)))
    assert all(block.attn.causal_axes == () for block in model.blocks)


def test_grid_transformer_checks_its_arguments_and_input():
    with pytest.raises(ValueError, match="readout='max'; expected one of"):
        GridTransformer(
            Grid((4,)),
            in_chans=1,
            num_outputs=1,
            backbone=BackboneConfig(),
            attn_layer=BUILTIN["concentration"].layer("4"),
            readout="max",
        )
    with pytest.raises(ValueError, match="embed_dim=30 must be divisible by num_heads=4"):
        BackboneConfig(embed_dim=30, num_heads=4)
    model = GridTransformer(
        Grid((4, 5)),
        in_chans=2,
        num_outputs=3,
        backbone=BackboneConfig(),
        attn_layer=BUILTIN["concentration"].layer("4x5"),
    )
    assert model(torch.randn(2, 2, 4, 5)).shape == (2, 3)
    with pytest.raises(ValueError, match=r"expected input \(B, 2, 4, 5\); got \(2, 2, 5, 4\)"):
        model(torch.randn(2, 2, 5, 4))


def test_grid_transformer_reads_out_every_token_in_row_major_order():
    """``readout="tokens"``: one output per token; without token mixing, changing one cell changes
    that cell's output alone, at its row-major index."""
    torch.manual_seed(0)
    model = GridTransformer(
        Grid((3, 4)),
        in_chans=2,
        num_outputs=5,
        backbone=BackboneConfig(embed_dim=16, depth=1, num_heads=2),
        attn_layer=BUILTIN["tokenwise"].layer("3x4"),
        readout="tokens",
    ).eval()
    x = torch.randn(2, 2, 3, 4)
    changed = x.clone()
    changed[:, :, 1, 2] += 1.0
    with torch.no_grad():
        before, after = model(x), model(changed)  # (2, 12, 5) each
    assert before.shape == (2, 12, 5)
    moved = (after - before).abs().amax(dim=(0, 2))  # (12,)
    assert moved[1 * 4 + 2] > 1e-3 and moved.nonzero().flatten().tolist() == [6]


def test_divided_attention_is_the_registered_mixer_on_every_track_that_offers_it():
    # `--idea divided-attention` trains the same registered mixer everywhere: on video (the track's
    # own model of that name) as on every other track whose backbone takes it, each built by the
    # registered builder.
    registry, spec = load_registry(), BUILTIN["divided-attention"]
    grids = {"image": Grid((8, 8)), "video": Grid((4, 4, 4))}
    built = {}
    for name, grid in grids.items():
        track = registry.track(name)
        model = track.model_for_mixer("divided-attention").build(grid)
        mixers = [m for m in model.modules() if getattr(m, MIXER_TAG, None) is not None]
        direct = spec.build(32, grid, num_heads=2, qkv_bias=True)
        assert mixers and all(getattr(m, MIXER_TAG) == "divided-attention" for m in mixers), name
        assert all(type(m) is type(direct) for m in mixers), name
        shapes = [[tuple(p.shape) for p in m.parameters()] for m in mixers]
        assert shapes == [[tuple(p.shape) for p in direct.parameters()]] * len(mixers), name
        built[name] = model
    assert registry.track("video").model("divided-attention").mixer == "divided-attention"
    assert len(built["video"].blocks) == 2


def test_every_built_in_model_naming_a_mixer_is_built_from_it():
    # A model that names a registered mixer is built through MixerSpec.layer: its mixer modules
    # carry that name.
    registry = load_registry()
    for track, grid in TRACKS:
        for spec in registry.track(track.name).models:
            if spec.mixer is None:
                continue
            names = {
                getattr(m, MIXER_TAG) for m in spec.build(grid).modules() if hasattr(m, MIXER_TAG)
            }
            assert names == {spec.mixer}, (track.name, spec.name, names)


def test_image_vits_normalise_tokens_before_pooling_and_mixers_start_at_the_mean():
    # A LayerNorm after the pooling is a nonlinearity across tokens: with it a model without token
    # mixing could solve the image task. Every ViT of the track normalises each token before pooling
    # instead.
    for spec in image_track().models:
        if spec.name == "mlp-mixer":
            continue
        model = spec.build(Grid((8, 8)))
        assert isinstance(model.fc_norm, torch.nn.Identity) and isinstance(
            model.norm, torch.nn.LayerNorm
        ), spec.name
    mixer = image_track().idea.build(Grid((8, 8))).blocks[0].attn
    assert mixer.config["start"] == (
        "mean",
        "mean",
    )  # the DC mode at sigmoid(4), the others at sigmoid(-4)
    assert all(
        torch.equal(f.theta[:, 0], torch.full_like(f.theta[:, 0], 4.0)) for f in mixer.axis_factors
    )
    assert all(
        torch.equal(f.theta[:, 1:], torch.full_like(f.theta[:, 1:], -4.0))
        for f in mixer.axis_factors
    )


def test_video_mixer_starts_near_the_average_over_the_whole_clip():
    # The clip's mean tells the label (the scene's tint kept or flipped at the cut): every factor
    # starts with its DC mode dominant, so every frame weighs every frame and every place every
    # place, as uniform attention does.
    model = video_track().idea.build(Grid((4, 6, 6)))
    mixer = next(m for m in model.modules() if isinstance(m, ConcentrationMixer))
    assert mixer.config["start"] == ("global", "global", "global")
    for factor in mixer.factors():  # (heads, n, n) per axis: time 4, height 6, width 6
        assert (factor.detach() > 0.1).all()


def test_mixer_config_rejects_an_unknown_start():
    with pytest.raises(ValueError, match="start='uniform'"):
        MixerConfig(start="uniform")
