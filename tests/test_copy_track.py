"""The ``copy`` track: its generator's invariants (every target the source's value at the same
index, read from the input; the target block blank; the rung's distance between the blocks;
balanced targets), the refusals, the no-mixing control at chance on every rung, and the track on the
command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from gridmix_tracks import copy_track
from gridmix_tracks.common import IGNORE
from gridmix_tracks.copy_track import CopyTask, block_cells
from typer.testing import CliRunner

from gridmix import orchestrate
from gridmix.analysis.references import naive_references
from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes
from tests.test_graded_tracks import installed, train_briefly  # noqa: F401 (a fixture)


def found_blocks(sample: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The source's and the target's cells (k, D) each, by index within the block, read from one
    input (1 + 2k, *grid) alone: cell ``i`` of a block is where its marker channel ``i`` is 1."""
    k = (len(sample) - 1) // 2
    assert set(np.unique(sample[1:])) == {0.0, 1.0}
    blocks = []
    for first in (1, 1 + k):
        marks = [np.argwhere(sample[first + i] == 1) for i in range(k)]
        assert all(len(m) == 1 for m in marks)  # each index marks exactly one cell
        blocks.append(np.concatenate(marks))
    return blocks[0], blocks[1]


@pytest.mark.parametrize("grid", ["8x8", "6x6x6", "64"])
def test_every_target_is_the_source_value_at_the_same_index_in_the_input(grid):
    grid = Grid.parse(grid)
    task = CopyTask("dist-4")
    copies = task.draw(np.random.default_rng(1), 100, grid)
    k = 2**grid.ndim
    assert copies.inputs.shape == (100, 1 + 2 * k, *grid.shape)
    for sample, targets, corners in zip(copies.inputs, copies.targets, copies.corners):
        source, target = found_blocks(sample)
        cells = block_cells(grid.ndim)  # (k, D): a whole block, in row-major order
        assert (source == corners[0] + cells).all() and (target == corners[1] + cells).all()
        values = sample[0]
        looked_up = (values[tuple(source.T)] > 0).astype(np.int64)  # (k,)
        assert (targets[tuple(target.T)] == looked_up).all()
        assert (values[tuple(target.T)] == 0).all()  # the target block is blank
        asked = np.zeros(grid.shape, dtype=bool)
        asked[tuple(target.T)] = True
        assert (targets[~asked] == IGNORE).all()  # only the target's cells are asked
        assert set(np.unique(values[~asked])) == {-1.0, 1.0}  # every other cell a ±1 value


def test_targets_balanced_and_target_tokens_independent_of_them():
    """Targets are fair coins; a target cell's token (a blank value and its marker) is the same
    whatever its target, so the mean target given the token is 1/2 (no mixing: chance)."""
    copies = CopyTask("dist-2").draw(np.random.default_rng(0), 20000, Grid((8, 8)))
    asked = copies.targets != IGNORE  # (S, 8, 8)
    targets = copies.targets[asked]  # (S·4,)
    # 80000 fair coins: the standard error of their mean is about 0.0018
    assert abs(targets.mean() - 0.5) < 0.01
    tokens = np.moveaxis(copies.inputs, 1, -1)[asked]  # (S·4, 9): the target cells' tokens
    assert (tokens[:, 0] == 0).all()
    for index in range(4):  # the target's marker index: the token's only varying part
        ones = targets[tokens[:, 5 + index] == 1]
        assert len(ones) == 20000 and abs(ones.mean() - 0.5) < 0.02


@pytest.mark.parametrize("rung", list(copy_track.LADDER))
def test_the_blocks_are_the_rung_s_distance_apart(rung):
    task, grid = CopyTask(rung), Grid((16, 16))
    copies = task.draw(np.random.default_rng(2), 300, grid)
    offsets = set()
    for sample in copies.inputs:
        source, target = found_blocks(sample)
        offset = target[0] - source[0]
        assert np.abs(offset).max() == copy_track.LADDER[rung]  # Chebyshev
        offsets.add(tuple(offset))
    assert len(offsets) > 4  # directions vary, not one axis


def test_settings_change_what_they_say_and_misfits_are_refused():
    track = copy_track.make_track()
    assert track.default_grid == Grid((8, 8)) and track.settings["difficulty"] == "dist-2"
    assert (track.chance, track.ceiling, track.direction) == (0.5, 1.0, "higher")
    assert [
        track.with_settings({"difficulty": rung}).default_grid for rung in copy_track.LADDER
    ] == [Grid((n, n)) for n in (8, 8, 10, 16)]
    far = track.with_settings({"difficulty": "dist-8"})
    assert "8 cells away" in far.description and far.supports(Grid((10, 10))) is None
    assert far.supports(Grid((8, 8))) == (
        "dist-8 puts the blocks 8 cells apart: it needs an axis of 10 cells (the smallest grid "
        "of equal sides is 10x10); got 8x8"
    )
    assert far.supports(Grid((10, 4))) is None  # one axis long enough
    assert track.with_settings({"dims": 3}).default_grid == Grid((4, 4, 4))
    assert track.with_settings({"dims": 1}).default_grid == Grid((64,))
    far_3d = track.with_settings({"difficulty": "dist-8", "dims": 3})
    assert far_3d.default_grid == Grid((10, 10, 10))  # the default grid grows to fit the rung
    assert "the smallest grid of equal sides is 10x10x10" in far_3d.supports(Grid((6, 6, 6)))
    assert track.supports(Grid((4, 4))) is None  # no floor on the cells: nothing to look up
    assert track.supports(Grid((64, 1))) == (
        "every axis needs at least 2 cells (a block's side); got 64x1"
    )
    with pytest.raises(ValueError, match="difficulty='dist-3'; expected one of dist-2, dist-4"):
        track.with_settings({"difficulty": "dist-3"})


@pytest.mark.parametrize("rung", list(copy_track.LADDER))
def test_control_at_chance_and_no_reference_fits(rung, one_thread):
    """On every rung's smallest square grid, after a short training, the no-mixing control scores
    about 1/2 at the target cells; the references fit whole-sample targets only (``kind: none``)."""
    track = copy_track.make_track().with_settings({"difficulty": rung})
    grid = CopyTask(rung).smallest(2)
    sizes = DataSizes(n_train=512, n_val=8, n_test=512)
    assert naive_references(track, grid, sizes) == {"kind": "none", "values": {}}
    data = track.make_data(grid, 0, sizes)
    torch.manual_seed(0)
    accuracy = train_briefly(track.control.build(grid), data, track, epochs=3)
    # 2048 target cells at chance 1/2: the standard error is about 0.011
    assert abs(accuracy - 0.5) < 0.04, accuracy


# ---------------------------------------------------------------- the command line


@pytest.mark.usefixtures("installed")
def test_tracks_lists_copy_with_its_ladder():
    result = CliRunner().invoke(app, ["tracks", "--json"])
    assert result.exit_code == 0, result.output
    tracks = {t["name"]: t for t in json.loads(result.output)["tracks"]}
    assert "ladder: dist-2 < dist-4 < dist-8 < dist-14" in tracks["copy"]["description"]
    assert tracks["copy"]["settings"]["difficulty"] == "dist-2"


@pytest.mark.usefixtures("installed")
def test_a_sweep_over_the_ladder_plans_one_study_per_rung():
    planned = orchestrate.plan_sweep(
        "copy", [("difficulty", ["dist-2", "dist-4"])], budget="smoke", threads=1
    )
    assert [point.values for point in planned.points] == [
        {"difficulty": "dist-2"},
        {"difficulty": "dist-4"},
    ]
    with pytest.raises(ValueError, match="sweep point difficulty=dist-8: .*equal sides is 10x10"):
        orchestrate.plan_sweep(
            "copy", [("difficulty", ["dist-2", "dist-8"])], grid="8x8", budget="smoke", threads=1
        )


@pytest.mark.usefixtures("installed")
def test_a_rung_that_does_not_fit_is_refused_on_the_command_line(tmp_path):
    arguments = ["run", "--track", "copy", "--grid", "8x8", "--budget", "smoke"]
    result = CliRunner().invoke(
        app,
        [*arguments, "--set", "difficulty=dist-8", "--out", str(tmp_path / "out")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "dist-8 puts the blocks 8 cells apart: it needs an axis of 10 cells" in result.output


@pytest.mark.usefixtures("installed")
def test_a_sweep_over_the_ladder_runs(tmp_path):
    arguments = ["sweep", "--track", "copy", "--over", "difficulty=dist-2,dist-4"]
    result = CliRunner().invoke(
        app,
        [
            *arguments,
            *("--grid", "6x6", "--models", "transformer-tokenwise", "--budget", "smoke"),
            *("--lrs", "3e-3", "--threads", "1", "--jobs", "1", "--out", str(tmp_path / "out")),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "out" / "sweep_report.json").read_text())
    assert [point["values"] for point in document["points"]] == [
        {"difficulty": "dist-2"},
        {"difficulty": "dist-4"},
    ]
