"""``gridmix run --eval-grids``: on the fake track the study's own numbers are those of a plain run,
every final run is also tested on the other grids as an independent computation of the same model
there says, a model that cannot change grid is reported (not failed), and a track whose task is not
defined elsewhere says so in one line."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from timm.layers import Attention
from typer.testing import CliRunner

from gridmix import orchestrate
from gridmix.analysis.idea_mechanism import idea_mechanism
from gridmix.cli import app
from gridmix.cli.run import analysis_errors
from gridmix.core.grid import Grid
from gridmix.orchestrate import choose_eval_grids
from gridmix.report.build import TIMING_KEYS
from gridmix.report.types import Report
from gridmix.study.executors import InProcessExecutor
from gridmix.study.spec import Study
from gridmix.study.train import train_run
from gridmix.tracks import UNDECLARED_GRIDS
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track

OPTIONS = dict(budget="smoke", seeds=3, threads=1, scaling=False, models="fake-attention")


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[fake_track], refresh=True)
    load_registry(refresh=True)


def headline(out) -> dict:
    report = json.loads((out / "bench_report.json").read_text())
    return {key: value for key, value in report.items() if key not in (*TIMING_KEYS, "transfer")}


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """The fake track on 8, once plain and once also tested on 4 and 16."""
    load_registry(extra_plugins=[fake_track], refresh=True)
    root = tmp_path_factory.mktemp("transfer")
    plain = orchestrate.run("fake", "8", out=root / "plain", **OPTIONS)
    moved = orchestrate.run("fake", "8", out=root / "moved", eval_grids="4,16", **OPTIONS)
    return root, plain, moved


def test_testing_elsewhere_leaves_the_study_s_own_numbers_as_a_plain_run_s(studies):
    root, plain, moved = studies
    assert headline(root / "plain") == headline(root / "moved")
    assert plain.transfer is None and [point.grid for point in moved.transfer.grids] == ["4", "16"]


def test_each_final_run_is_tested_elsewhere_as_an_independent_computation_says(studies):
    _, _, moved = studies
    track = load_registry().track("fake")
    spec = track.model("fake-attention")
    budget = track.budget("smoke", seeds=3)
    lr = moved.arms["fake-attention"].lr
    for index, seed in enumerate(moved.comparison_seeds):
        data = track.make_data(Grid.parse("8"), seed, budget.sizes)
        kept = []
        train_run(
            track,
            spec,
            Grid.parse("8"),
            lr=lr,
            seed=seed,
            budget=budget,
            data=data,
            device=torch.device("cpu"),
            after_training=lambda model, data, kept=kept: kept.append(model) or {},
        )
        trained = kept[0].state_dict()
        other = fake_track.Net(Grid.parse("16"), Attention(8, num_heads=2))
        state = dict(trained)
        # (8, C): positions at cell centres of 8, read at those of 16
        old = trained["pos_embed"][0].double().numpy()
        centres = np.clip((np.arange(16) + 0.5) * 8 / 16 - 0.5, 0, 7)
        state["pos_embed"] = torch.tensor(
            np.stack([np.interp(centres, np.arange(8), old[:, c]) for c in range(8)], 1),
            dtype=torch.float32,
        )[None]
        other.load_state_dict(state)
        test = track.make_data(Grid.parse("16"), seed, budget.sizes).test
        with torch.no_grad():
            expected = float(((other.eval()(test.inputs) - test.targets) ** 2).mean())
        assert moved.transfer.grids[1].arms["fake-attention"].per_seed[index] == pytest.approx(
            expected, rel=1e-5
        )


def test_a_model_that_cannot_change_grid_is_reported_not_failed(studies):
    root, _, moved = studies
    at4 = moved.transfer.grids[0]
    idea = at4.arms["fake-mixer"]
    assert idea.statuses == ("cannot",) * 3 and idea.per_seed == () and idea.mean is None
    assert idea.reasons == (
        "cannot run at 4: its mixer 'concentration' cannot change to 4: axis 0 of 4 has length 4 "
        "< its 8 modes; regrid needs n >= modes",
    )
    assert (
        at4.comparison.verdict == "not compared"
        and "fake-mixer cannot run at 4" in at4.comparison.reason
    )
    assert at4.arms["fake-attention"].statuses == ("ok",) * 3
    assert not moved.failures and moved.verdict == plain_verdict(root)
    markdown = (root / "moved" / "report.md").read_text()
    assert (
        "| fake-mixer | cannot run | " in markdown
        and "## Transfer to other grids (secondary" in markdown
    )
    assert (root / "moved" / "transfer.png").exists()


def plain_verdict(root) -> str:
    return json.loads((root / "plain" / "bench_report.json").read_text())["comparison"]["verdict"]


def test_the_transfer_legend_sits_outside_the_data(studies):
    from gridmix.report.plots import figure_transfer

    fig = figure_transfer(studies[2])
    fig.canvas.draw()
    (ax,) = fig.axes
    assert ax.get_legend() and not ax.get_legend().get_window_extent().overlaps(
        ax.get_window_extent()
    )


def test_the_transfer_section_survives_the_json_and_gridmix_report(studies):
    root, _, moved = studies
    assert Report.from_dict(moved.to_dict()) == moved
    before = json.loads((root / "moved" / "bench_report.json").read_text())["transfer"]
    result = CliRunner().invoke(app, ["report", str(root / "moved")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert json.loads((root / "moved" / "bench_report.json").read_text())["transfer"] == before
    assert (
        "transfer to 4 (secondary, alone at α): fake-mixer − fake-attention: not compared"
        in result.output
    )


class Counting(InProcessExecutor):
    def __init__(self):
        super().__init__(after_training=idea_mechanism)  # as gridmix run hands it in
        self.ran = []

    def run(self, tasks, **hooks):
        self.ran += [task.key for task in tasks]
        super().run(tasks, **hooks)


def test_a_plain_study_asked_later_for_other_grids_is_run_again_with_the_same_numbers(tmp_path):
    orchestrate.run("fake", "8", out=tmp_path, **OPTIONS)
    before = headline(tmp_path)
    executor = Counting()
    planned = orchestrate.plan_study("fake", "8", eval_grids="16", **OPTIONS)
    outcome = orchestrate.run_study(
        planned, orchestrate.open_ledger(tmp_path, planned), executor, tmp_path
    )
    assert len(executor.ran) == 2 * 3  # the final runs, not the learning-rate sweep's
    assert headline(tmp_path) == before
    assert outcome.report.transfer.grids[0].arms["fake-mixer"].statuses == ("ok",) * 3
    executor.ran.clear()
    orchestrate.run_study(planned, orchestrate.open_ledger(tmp_path, planned), executor, tmp_path)
    assert executor.ran == []  # evaluated once, kept in the ledger


def test_a_failing_evaluation_is_recorded_and_the_run_stands(tmp_path):
    # seed 0's data at 16 builds (the study's plan checks it), the others' fail
    def broken(grid, seed, sizes):
        if grid[0] == 16 and seed > 0:
            raise RuntimeError("no data on 16")
        return fake_track.make_data(grid, seed, sizes)

    track = dataclasses.replace(fake_track.TRACK, make_data=broken, rebuild=None, settings={})
    load_registry(
        extra_plugins=[SimpleNamespace(gridmix_tracks=fake_track.hookimpl(lambda: [track]))],
        refresh=True,
    )
    report = orchestrate.run("fake", "8", out=tmp_path, eval_grids="16", **OPTIONS)
    arm = report.transfer.grids[0].arms["fake-attention"]
    assert arm.statuses == ("ok", "failed", "failed")
    assert arm.reasons == ("failed at 16: RuntimeError: no data on 16",)
    assert not report.failures and report.arms["fake-attention"].n == 3
    assert (
        "transfer of fake-attention: failed at 16: RuntimeError: no data on 16"
        in analysis_errors(report)
    )


def test_a_track_whose_task_is_not_defined_elsewhere_says_so_in_one_line(tmp_path):
    track = load_registry().track("fake")
    for reason in (UNDECLARED_GRIDS, "its files are cut at one length"):
        with pytest.raises(ValueError) as error:
            choose_eval_grids(
                dataclasses.replace(track, fixed_grid=reason),
                Grid.parse("8"),
                "16",
                track.budget("smoke"),
            )
        assert (
            str(error.value)
            == f"--eval-grids: track 'fake' is not defined at other grids: {reason}"
        )
    result = CliRunner().invoke(
        app,
        ["run", "--track", "sequence-csv", "--eval-grids", "32", "--out", str(tmp_path / "out")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "track 'sequence-csv' is not defined at other grids" in result.output


def test_evaluation_grids_are_checked_against_the_track_and_the_training_grid_is_dropped():
    notes = []
    track = load_registry().track("fake")
    budget = track.budget("smoke")
    assert choose_eval_grids(track, Grid.parse("8"), "16, 8,4", budget, note=notes.append) == (
        "16",
        "4",
    )
    assert notes == ["--eval-grids: 8 is the training grid; its test metric is the study's own"]
    with pytest.raises(ValueError, match="--eval-grids '16,4,16' names '16' twice"):
        choose_eval_grids(track, Grid.parse("8"), "16,4,16", budget)
    with pytest.raises(ValueError, match="--eval-grids 4x4: track 'fake' takes 1-d grids"):
        choose_eval_grids(track, Grid.parse("8"), "4x4", budget)
    assert orchestrate.plan_study("fake", "8", **OPTIONS).study.to_dict().get("eval_grids") is None


def test_the_study_spec_keeps_the_evaluation_grids():
    study = orchestrate.plan_study("fake", "8", eval_grids="16", **OPTIONS).study
    assert study.to_dict()["eval_grids"] == ("16",)
    assert Study.from_dict(json.loads(json.dumps(study.to_dict()))) == study
    # only the comparison seeds' runs are tested
    assert all(task.eval_grids == () for task in study.sweep_tasks())
    assert (
        study.task("fake-mixer", 1e-3, 0).key
        == study.task("fake-mixer", 1e-3, 0, eval_grids=("16",)).key
    )
