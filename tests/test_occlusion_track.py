"""The graded video track ``occlusion``: its generator's invariants (the answer an extrapolation of
the visible frames and uniform over the last frame, the hidden frames blank, the ladder and the
distractors changing what they say), the chance level a function of the grid, the no-mixing control
at chance, and the track on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tomllib
import torch
from gridmix_tracks import common, occlusion
from gridmix_tracks.common import IGNORE
from gridmix_tracks.occlusion import DISTRACTOR, TARGET, OcclusionTask
from scipy.stats import chisquare
from typer.testing import CliRunner

from gridmix.analysis.references import chance_level, naive_references
from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.orchestrate.sweeping import plan_sweep
from gridmix.tracks import DataSizes
from tests.installed import install
from tests.test_graded_tracks import train_briefly


def extrapolated_answers(clips: np.ndarray) -> np.ndarray:
    """Each clip's answer from its pixels alone: the target (the one pixel of value 1) in the first
    two frames gives its velocity modulo the frame; its cell after ``T - 1`` steps, as an index
    into the last frame. clips (S, T, H, W) → (S,)."""
    S, T, H, W = clips.shape
    answers = []
    for clip in clips:
        (first,), (second,) = (np.argwhere(clip[t] == TARGET) for t in (0, 1))
        row, column = (first + (T - 1) * (second - first)) % (H, W)
        answers.append(row * W + column)
    return np.array(answers)


@pytest.mark.parametrize("grid", ["8x8x8", "9x5x6", "default"])
@pytest.mark.parametrize("distractors", [0, 2])
@pytest.mark.parametrize("rung", list(occlusion.LADDER))
def test_the_answer_is_the_extrapolated_target(grid, distractors, rung):
    task = OcclusionTask(rung, distractors)
    grid = task.default_grid() if grid == "default" else Grid.parse(grid)
    split = task.generate(np.random.default_rng(2), 300, grid)
    clips, answers = split.inputs[:, 0].numpy(), split.targets.numpy()  # (S, T, H, W) both
    assert (answers[:, :-1] == IGNORE).all()  # only the last frame's cells are asked
    last = answers[:, -1].reshape(len(answers), -1)  # (S, H·W)
    assert set(np.unique(last)) == {0, 1} and (last.sum(axis=1) == 1).all()
    assert (last.argmax(axis=1) == extrapolated_answers(clips)).all()


@pytest.mark.parametrize("rung", list(occlusion.LADDER))
def test_on_the_default_grid_the_answer_is_no_visible_frame_s_cell(rung):
    """No shortcut by the torus's period: the target's last-frame cell is never its cell in a
    visible frame (on ``9x7x7``, 8 steps are 1 and ``hidden-6``'s answer was the second frame's)."""
    task = OcclusionTask(rung)
    grid = task.default_grid()
    split = task.generate(np.random.default_rng(0), 200, grid)
    clips, answers = split.inputs[:, 0].numpy(), split.targets.numpy()  # (S, T, H, W) both
    answer = answers[:, -1].reshape(len(answers), -1).argmax(axis=1)  # (S,)
    for frame in range(grid[0] - task.hidden):
        seen = (clips[:, frame] == occlusion.TARGET).reshape(len(clips), -1).argmax(axis=1)
        assert (seen != answer).all(), frame


@pytest.mark.parametrize("rung", list(occlusion.LADDER))
def test_the_hidden_frames_hide_every_object(rung):
    task = OcclusionTask(rung, distractors=2)
    clips = task.generate(np.random.default_rng(0), 200, Grid((8, 8, 8))).inputs[:, 0].numpy()
    visible = 8 - occlusion.LADDER[rung].hidden
    assert ((clips[:, :visible] == TARGET).sum(axis=(2, 3)) == 1).all()  # one target per frame
    assert not clips[:, visible:].any()  # the hidden frames, the last among them, are blank


def test_the_ladder_hides_k_frames_of_the_same_motion():
    grid, blank = Grid((8, 8, 8)), {}
    for rung, (k, velocities, _, _) in occlusion.LADDER.items():
        split = OcclusionTask(rung).generate(np.random.default_rng(5), 50, grid)
        clips = split.inputs[:, 0]  # (S, T, H, W)
        blank[rung] = set((clips.flatten(2) == 0).all(dim=2).sum(dim=1).tolist())  # (S,) frames
        if velocities is not occlusion.VELOCITIES:
            continue
        if rung == "hidden-1":
            first, answers = clips, split.targets
        # the same seed draws the same objects: the rung only hides more of their motion
        assert torch.equal(clips[:, : 8 - k], first[:, : 8 - k])
        assert torch.equal(split.targets, answers)
    assert blank == {
        "shift-1": {1},
        "hidden-1": {1},
        "hidden-2": {2},
        "hidden-4": {4},
        "hidden-6": {6},
    }


def test_on_the_lowest_rung_every_object_moves_by_one_shift():
    """``shift-1``'s answer is the target's last sight moved by (1, 2), the same for every clip and
    object, a shift of the frame that is not its own inverse."""
    task, grid = OcclusionTask("shift-1", distractors=2), Grid((4, 7, 7))
    paths = task.draw_objects(np.random.default_rng(0), 300, grid).paths(4, (7, 7))  # (S, O, 4, 2)
    steps = (paths[:, :, 1:] - paths[:, :, :-1]) % 7  # (S, O, 3, 2)
    assert (steps == (1, 2)).all()
    assert tuple(np.array((1, 2)) % 7) != tuple(np.array((-1, -2)) % 7)
    description = occlusion.make_track(task).description
    assert description.startswith(
        "which cell of the last frame holds the object hidden in the last frame? (every object "
        "moves by (1, 2) a frame; distractors: 2)"
    )
    hidden_4 = occlusion.make_track(OcclusionTask("hidden-4")).description
    assert "hidden for the last 4 frames? (24 velocities; distractors: 1)" in hidden_4


def test_the_lowest_rung_trains_for_16_epochs_and_a_sweep_keeps_each_rung_s_budget():
    track = occlusion.make_track()
    assert track.settings["difficulty"] == "shift-1"
    assert track.budget("default").epochs == 16 and track.budget("smoke").epochs == 2
    assert track.budget("default", epochs=8).epochs == 8  # the command line still decides
    hidden_1 = track.with_settings({"difficulty": "hidden-1"})
    assert hidden_1.budget("default").epochs == 8
    planned = plan_sweep("occlusion", [("difficulty", ["shift-1", "hidden-1"])], budget="default")
    assert [point.planned.study.budget.epochs for point in planned.points] == [16, 8]


def test_each_rung_defaults_to_three_visible_frames_of_a_prime_side():
    grids = {
        rung: str(occlusion.make_track(OcclusionTask(rung)).default_grid)
        for rung in occlusion.LADDER
    }
    assert grids == {
        "shift-1": "4x5x5",
        "hidden-1": "4x7x7",
        "hidden-2": "5x7x7",
        "hidden-4": "7x7x7",
        "hidden-6": "9x11x11",
    }


@pytest.mark.parametrize("rung", list(occlusion.LADDER))
def test_on_the_default_grid_no_two_velocities_end_on_one_cell(rung):
    """No shortcut by aliasing: from the last sight, ``k`` steps of two different velocities end on
    different cells of the default frame (on 8x8, ``hidden-4``'s 4 steps end on 4 cells only)."""
    task, velocities = OcclusionTask(rung), occlusion.LADDER[rung].velocities  # (V, 2)
    _, H, W = task.default_grid().shape
    ends = {tuple(v) for v in (task.hidden * velocities) % (H, W)}
    assert len(ends) == len(velocities) == (1 if rung == "shift-1" else 24)
    assert len({tuple(v) for v in (4 * occlusion.VELOCITIES) % (8, 8)}) == 4


def test_distractors_are_the_other_objects():
    grid = Grid((8, 8, 8))
    counts = {}
    for d in (0, 1, 3):
        clips = OcclusionTask(distractors=d).generate(np.random.default_rng(0), 400, grid).inputs
        per_frame = (clips[:, 0, :7] == DISTRACTOR).flatten(2).sum(dim=2)  # (S, 7)
        counts[d] = (per_frame.max().item(), per_frame.float().mean().item())
    assert counts[0] == (0, 0.0)
    assert counts[1][0] == 1 and counts[3][0] == 3  # overlaps (with each other, under the target)
    assert 0.9 < counts[1][1] < 1 and 2.7 < counts[3][1] < 3  # take a few cells, rarely


@pytest.mark.parametrize("distractors", [0, 2])
def test_the_answer_is_uniform_over_the_last_frame(distractors):
    """The chance level 1/(H·W) rests on it: a goodness-of-fit test finds no departure."""
    split = OcclusionTask("hidden-2", distractors).generate(
        np.random.default_rng(1), 12_800, Grid((4, 8, 8))
    )
    cells = split.targets[:, -1].flatten(1).argmax(dim=1).numpy()  # (S,)
    counts = np.bincount(cells, minlength=64)
    assert chisquare(counts).pvalue > 0.001
    assert counts.min() > 200 - 60 and counts.max() < 200 + 60


def test_the_loss_and_metric_choose_among_the_asked_cells_only():
    """A softmax over the last frame's cells: logits elsewhere, however large, change nothing."""
    targets = torch.full((2, 2, 2), IGNORE)  # (S, T, H): two clips of 2 frames of 2 cells
    targets[:, -1] = torch.tensor([[0, 1], [1, 0]])  # answers: cell 3, then cell 2
    logits = torch.tensor([[9.0, 9.0, 0.0, 2.0], [9.0, 9.0, 0.0, 2.0]])[..., None]  # (S, N, 1)
    assert common.cell_choice_accuracy(logits, targets) == 0.5
    expected = torch.nn.functional.cross_entropy(
        torch.tensor([[0.0, 2.0], [0.0, 2.0]]), torch.tensor([1, 0])
    )
    assert torch.allclose(common.cell_choice_cross_entropy(logits, targets), expected)


def test_the_chance_level_is_one_cell_of_the_frame():
    track = occlusion.make_track()
    sizes = DataSizes(n_train=8, n_val=8, n_test=8)
    assert chance_level(track, track.default_grid, sizes) == 1 / 25  # shift-1's 5x5 frame
    hidden_1 = track.with_settings({"difficulty": "hidden-1"})
    assert chance_level(hidden_1, hidden_1.default_grid, sizes) == 1 / 49
    assert chance_level(track, Grid((5, 6, 4)), sizes) == 1 / 24


def test_refusals_are_one_line():
    track = occlusion.make_track()
    assert track.with_settings({"difficulty": "hidden-6", "distractors": "3"}).settings == {
        "difficulty": "hidden-6",
        "distractors": 3,
        "embed_dim": 32,
        "depth": 2,
    }
    with pytest.raises(ValueError, match="difficulty='hidden-3'; expected one of shift-1, "):
        track.with_settings({"difficulty": "hidden-3"})
    with pytest.raises(ValueError, match="distractors=-1; expected an integer >= 0"):
        track.with_settings({"distractors": -1})
    hidden_6 = track.with_settings({"difficulty": "hidden-6"})
    assert hidden_6.supports(Grid((8, 8, 8))) is None
    assert hidden_6.supports(Grid((7, 8, 8))) == (
        "hidden-6 hides 6 frames and needs 2 visible: at least 8 frames; got 7x8x8"
    )
    assert "frames must be at least 4x4; got 8x3x8" in track.supports(Grid((8, 3, 8)))
    assert "where it was in frame 1 (the answer would be a visible" in track.supports(
        Grid((8, 7, 7))
    )
    assert track.supports(Grid((8, 7, 6))) is None  # back at its start on one axis only
    # 8 steps are 1 on a 7x7 frame: hidden-6's last frame repeats the second, a visible one
    assert hidden_6.supports(Grid((9, 7, 7))) == (
        "on 9x7x7 every object is in the last frame where it was in frame 2 (the answer would be "
        "a visible frame's cell); change T or the frame"
    )
    assert "where it was in frame 2" in track.supports(Grid((9, 7, 7)))  # hidden-1 too
    assert track.supports(Grid((7, 7, 7))) is None


@pytest.mark.parametrize("rung", list(occlusion.LADDER))
def test_the_control_is_at_chance(one_thread, rung):
    """Every last-frame token is blank: the no-mixing control finds the answer no more often than
    one cell of the frame in ``H·W`` after a short training; the references fit whole-sample
    targets only."""
    track = occlusion.make_track(OcclusionTask(rung, distractors=0))
    grid, sizes = track.default_grid, DataSizes(n_train=512, n_val=64, n_test=1024)
    assert naive_references(track, grid, sizes) == {"kind": "none", "values": {}}
    accuracy = train_briefly(track.control.build(grid), track.make_data(grid, 0, sizes), track, 2)
    chance = occlusion.frame_chance(grid)  # 1/25 or 1/49
    # 1024 answers at chance: 3.5 standard errors (0.022 on 5x5 frames, 0.015 on 7x7) above it
    assert accuracy < chance + 3.5 * (chance * (1 - chance) / 1024) ** 0.5, (accuracy, chance)


# ---------------------------------------------------------------- the command line


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """gridmix's entry points as the worktree's pyproject.toml declares them."""
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    install(
        monkeypatch, tmp_path / "site", {"gridmix": project["project"]["entry-points"]["gridmix"]}
    )
    yield
    monkeypatch.undo()
    from gridmix.tracks.plugin_loader import load_registry

    load_registry(refresh=True)


def test_tracks_lists_the_ladder(installed):
    result = CliRunner().invoke(app, ["tracks", "--json"])
    assert result.exit_code == 0, result.output
    (track,) = [t for t in json.loads(result.output)["tracks"] if t["name"] == "occlusion"]
    assert "ladder: shift-1 < hidden-1 < hidden-2 < hidden-4 < hidden-6" in track["description"]
    assert track["settings"] == {
        "difficulty": "shift-1",
        "distractors": 1,
        "embed_dim": 32,
        "depth": 2,
    }


def test_a_rung_that_does_not_fit_is_refused_on_the_command_line(installed, tmp_path):
    arguments = ["run", "--track", "occlusion", "--grid", "6x8x8", "--budget", "smoke"]
    result = CliRunner().invoke(
        app,
        [*arguments, "--set", "difficulty=hidden-6", "--out", str(tmp_path / "out")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "hidden-6 hides 6 frames and needs 2 visible: at least 8 frames; got 6x8x8" in (
        result.output
    )


def test_a_sweep_over_the_ladder_runs(installed, tmp_path):
    arguments = ["sweep", "--track", "occlusion", "--over", "difficulty=hidden-1,hidden-2"]
    result = CliRunner().invoke(
        app,
        [
            *arguments,
            *("--grid", "4x4x4", "--models", "tokenwise", "--budget", "smoke"),
            *("--lrs", "3e-3", "--threads", "1", "--jobs", "1", "--out", str(tmp_path / "out")),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "out" / "sweep_report.json").read_text())
    assert [point["values"] for point in document["points"]] == [
        {"difficulty": "hidden-1"},
        {"difficulty": "hidden-2"},
    ]
