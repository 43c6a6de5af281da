"""The ``match`` track: its generator's invariants (balanced labels, the label determined by the
input, the rung's distance between the patterns, the settings changing what they say), the no-mixing
control and the references at chance, and the track on the command line."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
from gridmix_tracks import match
from gridmix_tracks.match import SIDE, MatchTask
from typer.testing import CliRunner

from gridmix import orchestrate
from gridmix.analysis.references import naive_references
from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes
from tests.test_graded_tracks import installed, train_briefly  # noqa: F401 (a fixture)


def found_patterns(sample: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The two patterns read from one input (2, *grid) alone: (corner, values) of each, the first
    corner the lowest marked cell of the mask in row-major order (the first cell of its block), the
    second pattern the marked cells left."""
    values, mask = sample  # (*grid) each
    assert set(np.unique(values)) == {-1.0, 1.0} and set(np.unique(mask)) == {0.0, 1.0}
    cells = np.array(list(itertools.product(range(SIDE), repeat=mask.ndim)))  # (k, D)
    nonzero = np.argwhere(mask != 0)  # (2k, D), row-major order
    assert len(nonzero) == 2 * len(cells)
    first = nonzero[0]
    block = {tuple(c) for c in first + cells}
    rest = np.array([c for c in nonzero if tuple(c) not in block])  # (k, D)
    second = rest[0]
    assert {tuple(c) for c in rest} == {tuple(c) for c in second + cells}  # a whole block
    a, b = (values[tuple((corner + cells).T)] for corner in (first, second))
    return first, a, second, b


@pytest.mark.parametrize("grid", ["16x16", "6x6x6", "64"])
def test_the_label_is_a_comparison_of_the_two_patterns_in_the_input(grid):
    grid = Grid.parse(grid)
    task = MatchTask("dist-4")
    pairs = task.draw(np.random.default_rng(1), 200, grid)
    assert pairs.inputs.shape == (200, 2, *grid.shape)
    for sample, label in zip(pairs.inputs, pairs.labels):
        _, a, _, b = found_patterns(sample)
        assert int((a == b).all()) == label
        if label == 0:
            assert (a != b).sum() == task.flips  # exactly the set number of cells differ


def test_labels_balanced_before_and_after_the_label_noise():
    task, grid = MatchTask(), Grid((16, 16))
    for n in (200, 201):
        pairs = task.draw(np.random.default_rng(n), n, grid)
        assert pairs.labels.sum() == n // 2  # odd: one more negative
        split = task.generate(np.random.default_rng(n), n, grid)
        assert split.inputs.shape == (n, 2, 16, 16) and split.targets.sum().item() == n // 2
    labels = task.draw(np.random.default_rng(0), 1000, grid).labels
    noisy = task.noisy(np.random.default_rng(0), labels)
    flipped = noisy != labels
    assert flipped[labels == 0].sum() == flipped[labels == 1].sum() == 50  # 10 % of each half


def test_tokens_alike_under_both_labels():
    """Every token has the same distribution under both labels: the mean of each cell's value, of
    its mask and of their product differ between the classes by sampling noise only."""
    pairs = MatchTask("dist-2").draw(np.random.default_rng(0), 40000, Grid((8, 8)))
    values, mask = pairs.inputs.reshape(len(pairs.inputs), 2, -1).transpose(1, 0, 2)  # (S, 64) each
    y = pairs.labels  # (S,)
    for moment in (values, mask, values * mask):
        gap = np.abs(moment[y == 1].mean(0) - moment[y == 0].mean(0))  # (64,)
        # 20000 samples a class, a cell's value has variance at most 1: standard error 0.01
        assert gap.max() < 0.05, gap.max()


@pytest.mark.parametrize("rung", list(match.LADDER))
def test_the_patterns_are_the_rung_s_distance_apart(rung):
    task, grid = MatchTask(rung), Grid((16, 16))
    pairs = task.draw(np.random.default_rng(2), 300, grid)
    offsets = set()
    for sample, corners in zip(pairs.inputs, pairs.corners):
        first, _, second, _ = found_patterns(sample)
        assert {tuple(first), tuple(second)} == {tuple(c) for c in corners}
        assert np.abs(second - first).max() == match.LADDER[rung]  # Chebyshev
        offsets.add(tuple(corners[1] - corners[0]))
    assert len(offsets) > 4  # directions vary, not one axis


def test_settings_change_what_they_say_and_misfits_are_refused():
    track = match.make_track()
    assert track.default_grid == Grid((16, 16)) and track.settings["difficulty"] == "dist-2"
    far = track.with_settings({"difficulty": "dist-8"})
    assert "8 cells apart" in far.description and far.supports(Grid((16, 16))) is None
    assert far.supports(Grid((8, 8))) == (
        "dist-8 puts the patterns 8 cells apart: it needs an axis of 10 cells (the smallest grid "
        "of equal sides is 10x10); got 8x8"
    )
    assert track.with_settings({"dims": 3}).default_grid == Grid((6, 6, 6))
    far_3d = track.with_settings({"difficulty": "dist-8", "dims": 3})
    assert far_3d.default_grid == Grid((10, 10, 10))  # the default grid grows to fit the rung
    assert "the smallest grid of equal sides is 10x10x10" in far_3d.supports(Grid((6, 6, 6)))
    assert far.supports(Grid((10, 8))) is None  # one axis long enough
    assert track.supports(Grid((64, 1))).startswith("every axis needs at least 2 cells")
    assert [MatchTask(rung).smallest(3) for rung in match.LADDER] == [
        Grid((n,) * 3) for n in (4, 6, 10, 16)
    ]
    assert track.with_settings({"dims": 1}).default_grid == Grid((256,))
    one = track.with_settings({"flips": "1"})
    assert "1 cells flipped" in one.description and one.chance == pytest.approx(math.log(2))
    assert one.supports(Grid((64,))) is None
    assert track.with_settings({"flips": 3}).supports(Grid((64,))) == (
        "flips=3; a pattern on a 1-d grid has only 2 cells"
    )
    assert track.supports(Grid((4, 4))).startswith("needs at least 64 cells")
    with pytest.raises(ValueError, match="difficulty='dist-3'; expected one of dist-2, dist-4"):
        track.with_settings({"difficulty": "dist-3"})
    with pytest.raises(ValueError, match="flips=0; expected at least 1"):
        track.with_settings({"flips": 0})
    assert track.ceiling == pytest.approx(0.3251, abs=1e-4)  # H(0.1)


@pytest.mark.parametrize("rung", list(match.LADDER))
def test_references_and_control_at_chance(rung, one_thread):
    """On every rung's smallest square grid, after a short training: the logistic probe, 1-NN and
    the no-mixing control score no better than ln 2 (the control's expected cross-entropy cannot
    go below it)."""
    track = match.make_track().with_settings({"difficulty": rung})
    grid = MatchTask(rung).smallest(2)
    sizes = DataSizes(n_train=512, n_val=128, n_test=512)
    references = naive_references(track, grid, sizes)
    # 0.03: a margin for the sampling noise of 512 test samples
    for name, value in references["values"].items():
        assert value > math.log(2) - 0.03, (name, value)
    assert {"logistic probe", "1-NN"} <= set(references["values"])
    data = track.make_data(grid, 0, sizes)
    torch.manual_seed(0)
    entropy = train_briefly(track.control.build(grid), data, track, epochs=3)
    assert entropy > math.log(2) - 0.03, entropy


# ---------------------------------------------------------------- the command line


@pytest.mark.usefixtures("installed")
def test_tracks_lists_match_with_its_ladder():
    result = CliRunner().invoke(app, ["tracks", "--json"])
    assert result.exit_code == 0, result.output
    tracks = {t["name"]: t for t in json.loads(result.output)["tracks"]}
    assert "ladder: dist-2 < dist-4 < dist-8 < dist-14" in tracks["match"]["description"]
    assert tracks["match"]["settings"]["difficulty"] == "dist-2"


@pytest.mark.usefixtures("installed")
def test_a_sweep_over_the_ladder_plans_one_study_per_rung():
    planned = orchestrate.plan_sweep(
        "match", [("difficulty", ["dist-2", "dist-4"])], budget="smoke", threads=1
    )
    assert [point.values for point in planned.points] == [
        {"difficulty": "dist-2"},
        {"difficulty": "dist-4"},
    ]
    with pytest.raises(ValueError, match="sweep point difficulty=dist-8: .*equal sides is 10x10"):
        orchestrate.plan_sweep(
            "match", [("difficulty", ["dist-2", "dist-8"])], grid="8x8", budget="smoke", threads=1
        )
