"""A trained model on another grid (gridmix.models.regrid): on its own grid every declared
resolution change is the identity, bit for bit; learned positions are resampled as independent
interpolations say; mixers without a resolution change, and parameters whose shape follows the grid,
are refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gridmix import ConcentrationMixer
from gridmix.core.grid import Grid
from gridmix.mixers.builtin import BUILTIN, MIXERS
from gridmix.mixers.contract import MIXER_TAG
from gridmix.models.regrid import CannotRegrid, mixer_name, regrid_model, resample_positions
from gridmix.tracks.plugin_loader import load_registry

pytestmark = pytest.mark.usefixtures("one_thread")
REGRIDS = {mixer.name: mixer.regrid for mixer in MIXERS}


def tokens(grid: str, prefix: int = 0, dim: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(
        2, prefix + Grid.parse(grid).numel, dim, generator=torch.Generator().manual_seed(seed)
    )


@pytest.mark.parametrize(
    ("grid", "causal", "prefix"),
    [("16", (), 0), ("16", (0,), 0), ("6x5", (), 1), ("6x5", (1,), 0), ("4x3x5", (0,), 2)],
)
def test_a_regridded_concentration_mixer_on_its_own_grid_is_bit_identical(grid, causal, prefix):
    torch.manual_seed(3)
    mixer = ConcentrationMixer(
        8, grid, num_heads=2, rank=3, causal_axes=causal, num_prefix_tokens=prefix
    )
    with torch.no_grad():
        for parameter in mixer.parameters():
            # a trained mixer, not its initialisation
            parameter.add_(0.3 * torch.randn_like(parameter))
    x = tokens(grid, prefix)
    same = mixer.regrid(grid)
    assert same is not mixer and torch.equal(same(x), mixer(x))


@pytest.mark.parametrize(
    ("spec", "grid", "causal"),
    [
        (spec, grid, causal)
        for spec in MIXERS
        for grid, causal in (("6x4", ()), ("6x4", (0,)))
        if spec.regrid is not None and spec.unfit(grid, causal_axes=causal) is None
    ],
    ids=lambda value: value.name if hasattr(value, "name") else str(value),
)
def test_every_declared_regrid_is_the_identity_on_the_same_grid(spec, grid, causal):
    torch.manual_seed(0)
    module = spec.layer(grid, causal_axes=causal)(8, num_heads=2, qkv_bias=True).eval()
    x = tokens(grid)
    with torch.no_grad():
        assert torch.equal(spec.regrid(module, Grid.parse(grid))(x), module(x))


@pytest.mark.parametrize(
    "name", ["neighbourhood-attention", "axial-attention", "divided-attention", "linear-attention"]
)
@pytest.mark.parametrize("causal", [(), (0,)])
def test_the_attention_peers_move_as_a_module_rebuilt_on_the_new_grid_with_the_state_loaded(
    name, causal
):
    spec = next(m for m in MIXERS if m.name == name)
    torch.manual_seed(1)
    trained = spec.layer("6x4", causal_axes=causal)(
        8, num_heads=2, qkv_bias=True, kernel_size=3
    ).eval()
    with torch.no_grad():
        for parameter in trained.parameters():
            parameter.add_(0.2 * torch.randn_like(parameter))
    rebuilt = spec.layer("5x9", causal_axes=causal)(
        8, num_heads=2, qkv_bias=True, kernel_size=3
    ).eval()
    rebuilt.load_state_dict(trained.state_dict())
    x = tokens("5x9", seed=4)
    with torch.no_grad():
        torch.testing.assert_close(
            spec.regrid(trained, Grid.parse("5x9"))(x), rebuilt(x), rtol=0, atol=0
        )


def test_resampled_positions_on_the_training_grid_are_the_identity():
    positions = torch.randn(1, 1 + 20, 6)
    for grid in ("20", "4x5", "2x2x5"):
        assert resample_positions(positions, grid, grid, num_prefix_tokens=1) is positions


def test_positions_on_1d_grids_are_linearly_interpolated_at_cell_centres():
    positions = torch.randn(1, 2 + 7, 3, dtype=torch.float64)
    moved = resample_positions(positions, "7", "12", num_prefix_tokens=2)
    # new cell centres in old index units
    centres = np.clip((np.arange(12) + 0.5) * 7 / 12 - 0.5, 0, 6)
    expected = np.stack(
        [np.interp(centres, np.arange(7), positions[0, 2:, c].numpy()) for c in range(3)], axis=1
    )
    assert torch.equal(moved[:, :2], positions[:, :2])  # the prefix positions are kept
    np.testing.assert_allclose(moved[0, 2:].numpy(), expected, rtol=1e-6)


def test_positions_on_2d_grids_are_resampled_bicubically_as_timm_does():
    positions = torch.randn(1, 6 * 4, 5)
    moved = resample_positions(positions, "6x4", "9x8")
    image = positions.reshape(1, 6, 4, 5).permute(0, 3, 1, 2)  # (1, C, H, W)
    expected = (
        F.interpolate(image, size=(9, 8), mode="bicubic", antialias=True)
        .permute(0, 2, 3, 1)
        .reshape(1, 72, 5)
    )
    torch.testing.assert_close(moved, expected)


def test_positions_on_3d_grids_are_resampled_trilinearly():
    positions = torch.randn(1, 3 * 4 * 5, 2)
    moved = resample_positions(positions, "3x4x5", "6x2x5")
    volume = positions.reshape(1, 3, 4, 5, 2).permute(0, 4, 1, 2, 3)  # (1, C, T, H, W)
    expected = (
        F.interpolate(volume, size=(6, 2, 5), mode="trilinear")
        .permute(0, 2, 3, 4, 1)
        .reshape(1, 60, 2)
    )
    torch.testing.assert_close(moved, expected)


def image_model(name: str, grid: str = "16x16") -> tuple[torch.nn.Module, object]:
    spec = load_registry().track("image").model(name)
    torch.manual_seed(0)
    model = spec.build(Grid.parse(grid)).eval()
    with torch.no_grad():
        # a trained model: positions and weights away from their start
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model, spec


@pytest.mark.parametrize("name", ["vit", "vit-concentration", "vit-tokenwise", "vit-global-filter"])
def test_a_model_moved_to_its_own_grid_is_bit_identical(name):
    model, spec = image_model(name)
    moved, how = regrid_model(
        model, spec.build(Grid.parse("16x16")), "16x16", "16x16", regrids=REGRIDS
    )
    x = torch.randn(3, 1, 16, 16)
    with torch.no_grad():
        assert torch.equal(moved.pos_embed, model.pos_embed) and torch.equal(moved(x), model(x))
    assert "pos_embed" not in how  # nothing to resample on the same grid


def test_attention_moves_with_its_positions_resampled_and_everything_else_copied():
    model, spec = image_model("vit")
    before = {key: value.clone() for key, value in model.state_dict().items()}
    moved, how = regrid_model(
        model, spec.build(Grid.parse("8x12")), "16x16", "8x12", regrids=REGRIDS
    )
    assert how == "2 × attention by its regrid; pos_embed resampled"
    state = moved.state_dict()
    for key, value in before.items():
        if key == "pos_embed":
            expected = resample_positions(value, "16x16", "8x12")
            assert torch.equal(state[key], expected)
        else:
            assert torch.equal(state[key], value), key
        assert torch.equal(model.state_dict()[key], value)  # the trained model is left as it was
    assert moved(torch.randn(2, 1, 8, 12)).shape == (2, 2)


@pytest.mark.parametrize(
    ("name", "grid", "reason"),
    [
        ("vit-token-mlp", "32x32", "its mixer 'token-mlp' declares no resolution change"),
        (
            "mlp-mixer",
            "8x8",
            "its parameter blocks.0.mlp_tokens.fc1.weight has shape (16, 256) on 16x16 but (16, "
            "64) on 8x8: it depends on the grid",
        ),
        (
            "vit-concentration",
            "8x8",
            "its mixer 'concentration' cannot change to 8x8: axis 0 of 8x8 has length 8 < its "
            "16 modes",
        ),
    ],
)
def test_a_model_that_cannot_change_grid_says_why_in_one_line(name, grid, reason):
    model, spec = image_model(name)
    with pytest.raises(CannotRegrid) as error:
        regrid_model(model, spec.build(Grid.parse(grid)), "16x16", grid, regrids=REGRIDS)
    assert str(error.value).startswith(reason) and "\n" not in str(error.value)


def test_a_forecasting_head_over_every_token_cannot_change_grid():
    spec = load_registry().track("sequence").model("transformer")
    model = spec.build(Grid.parse("32"))
    with pytest.raises(
        CannotRegrid, match=r"its parameter head\.weight has shape .* it depends on the grid"
    ):
        regrid_model(model, spec.build(Grid.parse("64")), "32", "64", regrids=REGRIDS)


def test_mixers_are_found_by_the_tag_the_one_construction_path_sets():
    spec = next(m for m in MIXERS if m.name == "global-filter")
    assert getattr(spec.layer("4x4")(8, num_heads=2), MIXER_TAG) == "global-filter"
    assert mixer_name(spec.layer("4x4")(8, num_heads=2)) == "global-filter"
    assert mixer_name(BUILTIN["tokenwise"].layer("4x4")(8, num_heads=2)) == "tokenwise"
    # built by hand, not by a registered mixer
    assert mixer_name(ConcentrationMixer(8, "4x4", num_heads=2)) is None
    assert mixer_name(torch.nn.Linear(2, 2)) is None


def test_an_unregistered_mixer_is_refused_not_guessed():
    model, spec = image_model("vit-global-filter")
    regrids = {name: regrid for name, regrid in REGRIDS.items() if name != "global-filter"}
    with pytest.raises(CannotRegrid, match="its mixer 'global-filter' .* is not registered"):
        regrid_model(model, spec.build(Grid.parse("32x32")), "16x16", "32x32", regrids=regrids)
