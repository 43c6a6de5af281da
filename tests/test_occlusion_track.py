"""The graded video track ``occlusion``: its generator's invariants (balanced labels, a label-blind
marker, the answer an extrapolation of the visible frames, the hidden frames blank, the ladder and
the distractors changing what they say), the no-mixing control and the references at chance, and
the track on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tomllib
import torch
from gridmix_tracks import occlusion
from gridmix_tracks.occlusion import DISTRACTOR, MARKER, TARGET, OcclusionTask
from scipy.stats import chi2_contingency
from typer.testing import CliRunner

from gridmix.analysis.references import naive_references
from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes
from tests.installed import install
from tests.test_graded_tracks import train_briefly


def extrapolated_labels(clips: np.ndarray, hidden: int) -> np.ndarray:
    """Each clip's answer from its pixels alone: the target (the one pixel of value 1) in the first
    two frames gives its velocity modulo the frame; is its cell after ``T - 1`` steps the marker's?
    clips (S, T, H, W)."""
    S, T, H, W = clips.shape
    labels = []
    for clip in clips:
        (first,), (second,) = (np.argwhere(clip[t] == TARGET) for t in (0, 1))
        final = (first + (T - 1) * (second - first)) % (H, W)
        (marker,) = np.argwhere(clip[T - 1] == MARKER)
        labels.append(int((final == marker).all()))
    return np.array(labels)


@pytest.mark.parametrize("grid", ["8x8x8", "9x5x6"])
@pytest.mark.parametrize("distractors", [0, 2])
@pytest.mark.parametrize("rung", list(occlusion.LADDER))
def test_the_label_is_the_extrapolated_target_at_the_marker(grid, distractors, rung):
    task = OcclusionTask(rung, distractors)
    split = task.generate(np.random.default_rng(2), 300, Grid.parse(grid))
    clips, labels = split.inputs[:, 0].numpy(), split.targets.numpy()
    assert (extrapolated_labels(clips, task.hidden) == labels).all()


@pytest.mark.parametrize("rung", list(occlusion.LADDER))
def test_the_hidden_frames_hide_every_object_and_the_last_holds_only_the_marker(rung):
    task = OcclusionTask(rung, distractors=2)
    clips = task.generate(np.random.default_rng(0), 200, Grid((8, 8, 8))).inputs[:, 0].numpy()
    visible = 8 - occlusion.LADDER[rung]
    assert (clips[:, :visible] >= 0).all()  # no marker before the last frame
    assert ((clips[:, :visible] == TARGET).sum(axis=(2, 3)) == 1).all()  # one target per frame
    assert not clips[:, visible:-1].any()  # the hidden frames before the last are blank
    last = clips[:, -1].reshape(len(clips), -1)  # (S, H·W)
    assert ((last == MARKER).sum(axis=1) == 1).all() and ((last == 0).sum(axis=1) == 63).all()


def test_the_ladder_hides_k_frames_of_the_same_motion():
    grid, blank = Grid((8, 8, 8)), {}
    for rung, k in occlusion.LADDER.items():
        clips = OcclusionTask(rung).generate(np.random.default_rng(5), 50, grid).inputs[:, 0]
        blank[rung] = set((clips.flatten(2) == 0).all(dim=2).sum(dim=1).tolist())  # (S,) frames
        if rung == "hidden-1":
            first = clips
        # the same seed draws the same objects: the rung only hides more of their motion
        assert torch.equal(clips[:, : 8 - k], first[:, : 8 - k])
    assert blank == {"hidden-1": {0}, "hidden-2": {1}, "hidden-4": {3}, "hidden-6": {5}}


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
def test_labels_are_balanced_and_the_marker_is_label_blind(distractors):
    """A positive clip's marker (the target's final cell) and a negative clip's (the decoy) are
    both uniform over the frame: a contingency test of their cells finds no difference."""
    split = OcclusionTask("hidden-2", distractors).generate(
        np.random.default_rng(1), 12_801, Grid((8, 8, 8))
    )
    labels = split.targets.numpy()
    assert labels.sum() == 6400  # an odd split has one more negative
    last = split.inputs[:, 0, -1].flatten(1).numpy()  # (S, 64)
    cells = (last == MARKER).argmax(axis=1)  # (S,)
    table = np.stack([np.bincount(cells[labels == y], minlength=64) for y in (0, 1)])
    assert chi2_contingency(table).pvalue > 0.001
    # the rarest and the commonest marker cell of each label stay within a uniform spread
    assert table.min() > 100 - 45 and table.max() < 100 + 45


def test_refusals_are_one_line():
    track = occlusion.make_track()
    assert track.with_settings({"difficulty": "hidden-6", "distractors": "3"}).settings == {
        "difficulty": "hidden-6",
        "distractors": 3,
        "embed_dim": 32,
        "depth": 2,
    }
    with pytest.raises(ValueError, match="difficulty='hidden-3'; expected one of hidden-1"):
        track.with_settings({"difficulty": "hidden-3"})
    with pytest.raises(ValueError, match="distractors=-1; expected an integer >= 0"):
        track.with_settings({"distractors": -1})
    hidden_6 = track.with_settings({"difficulty": "hidden-6"})
    assert hidden_6.supports(Grid((8, 8, 8))) is None
    assert hidden_6.supports(Grid((7, 8, 8))) == (
        "hidden-6 hides 6 frames and needs 2 visible: at least 8 frames; got 7x8x8"
    )
    assert "frames must be at least 4x4; got 8x3x8" in track.supports(Grid((8, 3, 8)))
    assert "every object is back at its start" in track.supports(Grid((8, 7, 7)))
    assert track.supports(Grid((8, 7, 6))) is None  # back at its start on one axis only


def test_the_control_and_the_references_are_at_chance(one_thread):
    """Every token is label-blind: the no-mixing control and the references (majority class,
    logistic probe, 1-NN on the pixels) stay at chance on the lowest and the highest rung, with no
    distractor (the fewest distinct clips for 1-NN to match) and with the default one."""
    grid, sizes = Grid((8, 8, 8)), DataSizes(n_train=512, n_val=64, n_test=512)
    for rung, distractors in (("hidden-1", 0), ("hidden-1", 1), ("hidden-6", 1)):
        track = occlusion.make_track(OcclusionTask(rung, distractors))
        references = naive_references(track, grid, sizes)
        # 512 balanced test clips: a guess's accuracy has standard error 0.022
        for name, value in references["values"].items():
            assert abs(value - 0.5) < 0.07, (rung, distractors, name, value)
    data = track.make_data(grid, 0, sizes)
    accuracy = train_briefly(track.control.build(grid), data, track, epochs=2)
    assert abs(accuracy - 0.5) < 0.07, accuracy


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
    assert "ladder: hidden-1 < hidden-2 < hidden-4 < hidden-6" in track["description"]
    assert track["settings"] == {
        "difficulty": "hidden-1",
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
