"""The graded tracks ``recall`` and ``pathfinder``: their generators' invariants (balanced labels or
answers, the answer determined by the input, the difficulty ladder changing what it says), the
no-mixing control and the references at chance, and the tracks on the command line."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
import torch
from gridmix_tracks import pathfinder, recall
from gridmix_tracks.pathfinder import Geometry, PathfinderTask
from gridmix_tracks.recall import IGNORE, GridRecallTask
from typer.testing import CliRunner

from gridmix.analysis.references import naive_references
from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes
from tests.installed import dist_info

# ---------------------------------------------------------------- recall


def lookup_answers(inputs: np.ndarray, vocab: int) -> np.ndarray:
    """The value at each query cell found by a direct lookup (the key's cell, its right neighbour);
    IGNORE elsewhere. inputs (S, *grid)."""
    flat = inputs.reshape(len(inputs), -1)  # (S, N)
    last = inputs.shape[-1]
    answers = np.full(flat.shape, IGNORE)
    for s, row in enumerate(flat):
        for cell in np.flatnonzero(row > 2 * vocab):
            (key_cell,) = np.flatnonzero(row == row[cell] - 2 * vocab)
            assert key_cell % last < last - 1  # the value cell is on the same row
            answers[s, cell] = row[key_cell + 1]
    return answers.reshape(inputs.shape)


@pytest.mark.parametrize("grid", ["8x8", "4x4x4", "64"])
@pytest.mark.parametrize("rung, pairs", [("pairs-1", 1), ("pairs-8", 8)])
def test_recall_answers_are_a_lookup_in_the_input(grid, rung, pairs):
    task = GridRecallTask(rung, vocab=16)
    split = task.generate(np.random.default_rng(1), 50, Grid.parse(grid))
    inputs, targets = split.inputs.numpy(), split.targets.numpy()
    assert inputs.shape == targets.shape == (50, *Grid.parse(grid).shape)
    assert (lookup_answers(inputs, 16) == targets).all()
    asked = (targets != IGNORE).sum(axis=tuple(range(1, targets.ndim)))
    assert (asked == pairs).all()  # every key asked once
    values_on_grid = ((inputs > 16) & (inputs <= 32)).sum(axis=tuple(range(1, inputs.ndim)))
    assert (values_on_grid == pairs).all()  # pairs-1: the grid's one value is the answer
    values = targets[targets != IGNORE]
    assert values.min() >= 17 and values.max() <= 32


def test_recall_ladder_adds_pairs_in_order():
    grid = Grid((8, 8))
    counts = []
    for rung in recall.LADDER:
        inputs = GridRecallTask(rung).generate(np.random.default_rng(0), 20, grid).inputs
        keys = ((inputs >= 1) & (inputs <= 32)).flatten(1).sum(dim=1)  # (S,)
        counts.append(set(keys.tolist()))
    assert counts == [{1}, {2}, {4}, {8}, {16}]
    assert recall.make_track().supports(Grid((4, 4))) is None
    assert "needs 32 dominoes" in recall.make_track(GridRecallTask("pairs-16")).supports(
        Grid((4, 4))
    )


def test_recall_settings_and_refusals():
    track = recall.make_track()
    assert track.with_settings({"difficulty": "pairs-16"}).chance == pytest.approx(1 / 32)
    assert track.with_settings({"vocab": "64"}).chance == pytest.approx(1 / 64)
    assert track.with_settings({"dims": 3}).default_grid == Grid((4, 4, 4))
    with pytest.raises(ValueError, match="difficulty='pairs-3'; expected one of pairs-1"):
        track.with_settings({"difficulty": "pairs-3"})
    with pytest.raises(ValueError, match="vocab=4; expected at least the 8 pairs"):
        track.with_settings({"difficulty": "pairs-8", "vocab": 4})


def train_briefly(model: torch.nn.Module, data, track, epochs: int) -> float:
    """A few epochs of AdamW at 3e-3 on the training split; the test metric."""
    torch.manual_seed(0)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(epochs):
        for batch in torch.randperm(len(data.train)).split(32):
            optimiser.zero_grad()
            track.loss(model(data.train.inputs[batch]), data.train.targets[batch]).backward()
            optimiser.step()
    with torch.no_grad():
        return track.metric(model(data.test.inputs), data.test.targets)


@pytest.mark.parametrize("rung", ["pairs-1", "pairs-2"])
def test_recall_control_at_chance(one_thread, rung):
    """Without token mixing the value at a query cell is out of reach, even on ``pairs-1`` where it
    is the grid's only value: the control scores about 1/vocab after a short training that fits the
    training split's answers no better."""
    track, grid = recall.make_track(GridRecallTask(rung, vocab=8)), Grid((4, 4))
    data = track.make_data(grid, 0, DataSizes(n_train=512, n_val=8, n_test=512))
    torch.manual_seed(0)
    accuracy = train_briefly(track.control.build(grid), data, track, epochs=3)
    # 1024 answers at chance 1/8: the standard error is about 0.010
    assert abs(accuracy - 1 / 8) < 0.04, accuracy


# ---------------------------------------------------------------- pathfinder


def joined(
    image: np.ndarray, a: tuple[int, int], b: tuple[int, int], link: int, wrap: bool = False
) -> bool:
    """Whether ink (any pixel not 0, the marked disc's included) connects ``a`` to ``b``, ink
    pixels up to ``link`` apart (Chebyshev, across the edges when ``wrap``) linked: a flood fill on
    the image alone."""
    ink = image != 0
    seen, queue = {a}, deque([a])
    while queue:
        r, c = queue.popleft()
        if (r, c) == b:
            return True
        for dr in range(-link, link + 1):
            for dc in range(-link, link + 1):
                q = (r + dr, c + dc)
                if wrap:
                    q = (q[0] % ink.shape[0], q[1] % ink.shape[1])
                if (
                    0 <= q[0] < ink.shape[0]
                    and 0 <= q[1] < ink.shape[1]
                    and ink[q]
                    and q not in seen
                ):
                    seen.add(q)
                    queue.append(q)
    return False


@pytest.mark.parametrize("rung", ["len-6", "len-9"])
def test_pathfinder_label_is_the_discs_connectivity(rung):
    grid = Grid((32, 32))
    task, link = PathfinderTask(rung), Geometry.of(grid).link
    rng = np.random.default_rng(3)
    for label in (0, 1) * 15:
        drawing = task.draw(rng, grid, label)
        assert joined(drawing.image, *drawing.discs, link) == bool(label)


@pytest.mark.parametrize("rung", ["trace-4", "trace-6"])
def test_pathfinder_trace_answer_is_the_disc_joined_to_the_marked_one(rung):
    grid = Grid((16, 16))
    task, link = PathfinderTask(rung), Geometry.of(grid).link
    rng = np.random.default_rng(3)
    for _ in range(30):
        drawing = task.draw(rng, grid)
        marked, answer, other = drawing.discs
        assert drawing.image[marked] == pathfinder.START
        assert drawing.image[answer] == drawing.image[other] == 1.0
        assert joined(drawing.image, marked, answer, link, wrap=True)
        assert not joined(drawing.image, marked, other, link, wrap=True)


def test_pathfinder_trace_targets_the_distance_coin_and_uniform_places():
    """One asked cell of each target (1) and one of each non-answer (0) per image, at the discs;
    the joined disc is the nearer of the two to the marked one in about half the images, so the
    distance tells nothing (without the coin it is the nearer in 88 % of ``trace-4``'s); on the
    torus the joined and the other disc lie anywhere alike, so their place tells nothing either."""
    task, grid = PathfinderTask("trace-4"), Grid((16, 16))
    split = task.generate(np.random.default_rng(0), 400, grid)
    targets = split.targets.flatten(1)  # (S, N)
    assert ((targets == 1).sum(dim=1) == 1).all() and ((targets == 0).sum(dim=1) == 1).all()
    assert set(split.inputs.unique().tolist()) == {pathfinder.START, 0.0, 1.0}
    rng = np.random.default_rng(1)
    drawings = [task.draw(rng, grid) for _ in range(400)]
    # 400 fair coins: standard error 0.025
    assert abs(np.mean([d.joined_nearer() for d in drawings]) - 0.5) < 0.1
    joined_rows, other_rows = (np.array([d.discs[k][0] for d in drawings]) for k in (1, 2))
    for rows in (joined_rows, other_rows):  # uniform rows: mean 7.5, sd 4.6 (sem 0.23)
        assert abs(rows.mean() - 7.5) < 1.0
        assert np.mean((rows < 2) | (rows > 13)) > 0.18  # 4 rows of 16: 0.25 (sem 0.022)


def test_pathfinder_trace_refuses_a_rung_whose_distance_cannot_be_balanced(monkeypatch):
    """A 3-dash contour on 16x16 ends nearer to the marked disc than any other disc can lie: the
    coin's "farther" cannot be drawn, and the error says so instead of looping."""
    monkeypatch.setitem(pathfinder.LADDER, "trace-3", pathfinder.Rung("trace", 3, 1, 3, 16, 14))
    monkeypatch.setattr(pathfinder, "BALANCE_TRIES", 40)
    task, rng = PathfinderTask("trace-3"), np.random.default_rng(0)
    with pytest.raises(ValueError, match="was nearer than the other in all 40 images"):
        for _ in range(20):  # each image a coin: the farther case comes in the first few
            task.draw(rng, Grid((16, 16)))


def test_pathfinder_trace_control_at_chance(one_thread):
    """The control's logit at a disc sees that disc's pixels and place only: at chance on both
    trace rungs."""
    for rung in ("trace-4", "trace-6"):
        track = pathfinder.make_track(PathfinderTask(rung))
        data = track.make_data(track.default_grid, 0, DataSizes(n_train=256, n_val=8, n_test=512))
        accuracy = train_briefly(track.control.build(track.default_grid), data, track, epochs=2)
        # 512 test images, two discs each: a guess has standard error 0.022
        assert abs(accuracy - 0.5) < 0.08, (rung, accuracy)


def test_pathfinder_labels_balanced_and_ink_alike():
    split = PathfinderTask("len-6").generate(np.random.default_rng(0), 200, Grid((32, 32)))
    labels, ink = split.targets, split.inputs.flatten(1).sum(dim=1)  # (S,), (S,)
    assert labels.sum().item() == 100
    assert set(split.inputs.unique().tolist()) == {0.0, 1.0}
    # the same contours for both labels: the mean ink differs by noise only (a few pixels)
    assert abs(ink[labels == 1].mean() - ink[labels == 0].mean()) < 3


def test_pathfinder_ladder_lengthens_contours():
    rng = np.random.default_rng(0)
    trace = {
        rung: np.mean(
            [PathfinderTask(rung).draw(rng, Grid((16, 16))).image.sum() for _ in range(10)]
        )
        for rung in ("trace-4", "trace-6")
    }
    assert trace["trace-4"] < trace["trace-6"]
    grid = Grid((32, 32))
    ink = {
        rung: np.mean([PathfinderTask(rung).draw(rng, grid, 1).image.sum() for _ in range(10)])
        for rung in ("len-6", "len-9", "len-14")
    }
    assert ink["len-6"] < ink["len-9"] < ink["len-14"]
    geometry = Geometry.of(Grid((128, 128)))
    assert (geometry.dash, geometry.gap, geometry.radius) == (8, 4, 4)  # Path-X-like scale
    with pytest.raises(ValueError, match="does not fit on 16x16"):
        PathfinderTask("len-14").draw(rng, Grid((16, 16)), 1)


def test_pathfinder_references_and_control_at_chance(one_thread):
    track, grid = pathfinder.make_track(PathfinderTask("len-6")), Grid((32, 32))
    data = track.make_data(grid, 0, DataSizes(n_train=256, n_val=64, n_test=256))
    references = naive_references(track, grid, DataSizes(256, 64, 256))
    # 256 balanced test images: a guess's accuracy has standard error 0.031
    for name, value in references["values"].items():
        assert abs(value - 0.5) < 0.1, (name, value)
    torch.manual_seed(0)
    accuracy = train_briefly(track.control.build(grid), data, track, epochs=2)
    assert abs(accuracy - 0.5) < 0.1, accuracy


# ---------------------------------------------------------------- the command line


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """gridmix's entry points as the worktree's pyproject.toml declares them, on sys.path first."""
    from pathlib import Path

    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    dist_info(tmp_path / "site", "gridmix", "0.1.0", project["project"]["entry-points"]["gridmix"])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delenv("GRIDMIX_PLUGINS", raising=False)
    monkeypatch.delenv("GRIDMIX_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    from gridmix.tracks.plugin_loader import load_registry

    load_registry(refresh=True)
    yield
    monkeypatch.undo()
    load_registry(refresh=True)


def test_tracks_lists_the_ladders(installed):
    result = CliRunner().invoke(app, ["tracks", "--json"])
    assert result.exit_code == 0, result.output
    import json

    tracks = {t["name"]: t for t in json.loads(result.output)["tracks"]}
    assert (
        "ladder: pairs-1 < pairs-2 < pairs-4 < pairs-8 < pairs-16"
        in tracks["recall"]["description"]
    )
    assert (
        "ladder: trace-4 < trace-6 < len-6 < len-9 < len-14" in tracks["pathfinder"]["description"]
    )
    assert tracks["recall"]["ladder"] == ["pairs-1", "pairs-2", "pairs-4", "pairs-8", "pairs-16"]
    assert tracks["recall"]["settings"]["difficulty"] == "pairs-1"
    assert tracks["pathfinder"]["settings"]["difficulty"] == "trace-4"
    assert tracks["pathfinder"]["default_grid"] == "16x16"
