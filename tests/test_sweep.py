"""``gridmix sweep``: on the fake track every point's numbers are a separate plain run's, a point a
plain run already trained into the directory is reused, an interrupted sweep resumes without
retraining finished points, an unknown setting is refused in one line, and the verdict's transitions
are read off the points as defined."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from gridmix import orchestrate
from gridmix.analysis.idea_mechanism import idea_mechanism
from gridmix.cli import app
from gridmix.report.build import TIMING_KEYS
from gridmix.report.sweep_report import transitions
from gridmix.study.executors import InProcessExecutor
from gridmix.study.ledger import Ledger, LedgerError
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track

OPTIONS = dict(budget="smoke", seeds=3, threads=1, models="fake-attention")


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[fake_track], refresh=True)
    load_registry(refresh=True)


class Counting(InProcessExecutor):
    """Runs tasks in this process, as `gridmix run` does, counting them; ``stop_after`` runs, it is
    interrupted."""

    def __init__(self, stop_after: int | None = None):
        super().__init__(after_training=idea_mechanism)
        self.ran, self.stop_after = [], stop_after

    def run(self, tasks, *, on_done, **hooks):
        def done(task, row):
            self.ran.append(
                (task.grid, tuple(sorted(task.settings.items())), task.model, task.lr, task.seed)
            )
            on_done(task, row)
            if self.stop_after is not None and len(self.ran) >= self.stop_after:
                raise KeyboardInterrupt

        super().run(tasks, on_done=done, **hooks)


def numbers(report) -> dict:
    """What a study measured, without wall-clock timings."""
    return {
        key: value
        for key, value in report.to_dict().items()
        if key not in (*TIMING_KEYS, "references")
    }


def run_sweep(out, over, executor=None, **options):
    planned = orchestrate.plan_sweep("fake", over, **{**OPTIONS, **options})
    ledger = orchestrate.open_sweep_ledger(out, planned)
    return orchestrate.run_sweep(planned, ledger, executor or Counting(), out)


def test_every_point_is_a_separate_plain_run(tmp_path):
    outcome = run_sweep(tmp_path / "sweep", [("grid", ["8", "16"]), ("dim", ["4", "8"])])
    assert [point.label for point in outcome.report.points] == [
        "grid=8, dim=4",
        "grid=8, dim=8",
        "grid=16, dim=4",
        "grid=16, dim=8",
    ]
    for point in outcome.report.points:
        grid, dim = point.values["grid"], point.values["dim"]
        plain = orchestrate.run(
            "fake",
            grid,
            out=tmp_path / f"plain-{grid}-{dim}",
            settings={"dim": dim},
            scaling=False,
            **OPTIONS,
        )
        assert numbers(point.report) == numbers(plain), point.label
    dims = {
        point.values["dim"]: point.report.arms["fake-attention"].per_seed
        for point in outcome.report.points
    }
    assert dims[4] != dims[8]  # the setting reached the model
    document = json.loads((tmp_path / "sweep" / "sweep_report.json").read_text())
    assert [p["values"] for p in document["points"]][1] == {"grid": "8", "dim": 8}
    assert (
        (tmp_path / "sweep" / "sweep.md")
        .read_text()
        .startswith("# gridmix sweep: fake-mixer vs fake-attention")
    )
    assert (tmp_path / "sweep" / "sweep_points.png").exists()


def test_a_point_a_plain_run_trained_in_the_directory_is_reused(tmp_path):
    plain = orchestrate.run("fake", "8", out=tmp_path, scaling=False, **OPTIONS)
    executor = Counting()
    outcome = run_sweep(tmp_path, [("grid", ["8", "16"])], executor)
    assert executor.ran and {grid for grid, *_ in executor.ran} == {"16"}  # nothing retrained on 8
    assert numbers(outcome.report.points[0].report) == numbers(plain)
    result = CliRunner().invoke(app, ["report", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert (
        "fake sweep" in result.output
        and (tmp_path / "report.md").exists()
        and (tmp_path / "sweep.md").exists()
    )
    # the plain study still runs there
    later = orchestrate.run("fake", "8", out=tmp_path, scaling=False, **OPTIONS)
    assert numbers(later) == numbers(plain)


def test_an_interrupted_sweep_resumes_without_retraining_finished_points(tmp_path):
    over = [("grid", ["8", "16"])]
    # point 8: 2 models × (2 sweep rates + 3 seeds) = 10 runs, then 4 of point 16
    first = Counting(stop_after=12 + 2)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(tmp_path, over, first)
    assert {run for run in first.ran if run[0] == "8"} == {run for run in first.ran[:10]}
    again = Counting()
    outcome = run_sweep(tmp_path, over, again)
    assert all(grid == "16" for grid, *_ in again.ran) and len(again.ran) == 20 - len(first.ran)
    assert not set(again.ran) & set(first.ran)
    uninterrupted = run_sweep(tmp_path / "whole", over)
    whole = [numbers(point.report) for point in uninterrupted.report.points]
    assert [numbers(point.report) for point in outcome.report.points] == whole


def test_an_unknown_setting_is_refused_in_one_line_listing_the_track_s_settings(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--track",
            "fake",
            "--over",
            "width=4,8",
            "--budget",
            "smoke",
            "--out",
            str(tmp_path / "out"),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "track 'fake' has no setting 'width'; its settings are dim (and grid)" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ([("grid", ["8"])], "expected at least two distinct values"),
        ([("grid", ["8", "8"])], "expected at least two distinct values"),
        ([("dim", ["4", "x"])], "setting dim='x'; expected int like its default 8"),
        ([("grid", ["8", "16"]), ("grid", ["4", "8"])], "swept twice or also set"),
        ([("grid", ["8", "8x8"])], "sweep point grid=8x8: track 'fake' takes 1-d grids"),
        ([], "a sweep needs --over NAME=V1,V2,…; track 'fake' sweeps grid and its settings dim"),
    ],
)
def test_a_bad_sweep_is_a_one_line_value_error(over, message):
    with pytest.raises(ValueError, match=message) as error:
        orchestrate.plan_sweep("fake", over, **OPTIONS)
    assert "\n" not in str(error.value)


def test_a_directory_holds_one_track_s_studies(tmp_path):
    orchestrate.run("fake", "8", out=tmp_path, scaling=False, **OPTIONS)
    planned = orchestrate.plan_sweep("mqar", [("grid", ["32", "64"])], budget="smoke", threads=1)
    with pytest.raises(
        LedgerError,
        match="holds the study of track 'fake' on grid 8; it cannot also hold a sweep of",
    ):
        orchestrate.open_sweep_ledger(tmp_path, planned)
    with Ledger(tmp_path / "swept") as ledger:
        ledger.set_sweep(dict(track="mqar", over=[], points=[]))
        with pytest.raises(LedgerError, match="holds a sweep of track 'mqar'"):
            ledger.set_study(dict(track="fake", grid="8"))


def test_the_setting_values_enter_the_run_key_only_off_their_default():
    plain = orchestrate.plan_study("fake", "8", **OPTIONS).study
    default = orchestrate.plan_study("fake", "8", settings={"dim": "8"}, **OPTIONS).study
    other = orchestrate.plan_study("fake", "8", settings={"dim": 4}, **OPTIONS).study
    key = lambda study: study.task("fake-mixer", 1e-3, 0).key  # noqa: E731
    assert key(plain) == key(default) != key(other)
    assert other.settings == {"dim": 4} and "settings" not in plain.to_dict()


def test_the_mqar_settings_rebuild_its_task_and_models():
    track = load_registry().track("mqar", {"pairs": "6", "embed_dim": 32})
    assert track.settings == dict(embed_dim=32, depth=2, pairs=6, queries=4, vocab=64)
    data = track.make_data(track.check_grid("32"), 0, track.budget("smoke").sizes)
    keys, values = (
        data.train.inputs[:, 0:12:2],
        data.train.inputs[:, 1:12:2],
    )  # 6 pairs: k v k v … in 12 tokens
    assert bool((keys >= 1).all() and (keys < 32).all() and (values >= 32).all())
    model = track.model("transformer").build(track.check_grid("32"))
    assert model.pos_embed.shape == (1, 32, 32)
    # the registry's models are there too
    assert track.model("transformer-global-filter").mixer == "global-filter"


def outcomes(*sequence: str, values=(1, 2, 3, 4)):
    return tuple(
        SimpleNamespace(values={"n": value}, outcome=outcome)
        for value, outcome in zip(values, sequence)
    )


@pytest.mark.parametrize(
    ("sequence", "found"),
    [
        (("worse", "worse", "tie", "better"), [("stops losing to", 3), ("starts beating", 4)]),
        (("worse", "tie", "worse", "tie"), [("stops losing to", 4)]),
        (("better", "better", "tie", "worse"), [("starts losing to", 4), ("stops beating", 3)]),
        (
            ("worse", "none", "tie", "tie"),
            [],
        ),  # worse at 1, unknown at 2: where it stopped losing is not known
        (("worse", "tie", "none", "tie"), []),  # no verdict at 3 breaks every transition through it
        (("tie", "tie", "tie", "tie"), []),
        (
            ("none", "better", "better", "better"),
            [],
        ),  # better from 2 on, but unknown before: no "starts beating"
    ],
)
def test_the_verdict_s_transitions_are_the_smallest_value_from_which_on_it_holds(sequence, found):
    got = transitions(outcomes(*sequence), (("n", (1, 2, 3, 4)),))
    assert sorted((t.kind, t.at) for t in got) == sorted(found)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(settings={"dim": 8}, rebuild=None), "expected a callable rebuild"),
        (dict(settings={}, rebuild=fake_track.make_track), "expected a callable rebuild"),
        (dict(settings={"grid": 8}, rebuild=fake_track.make_track), "not 'grid'"),
        (dict(settings={"dim": True}, rebuild=fake_track.make_track), "int, float or str"),
        (dict(fixed_grid=""), "fixed_grid ''; expected None or a one-line reason"),
    ],
)
def test_a_track_s_settings_and_grids_are_checked_when_it_is_built(fields, message):
    from gridmix.tracks import ContractError

    with pytest.raises(ContractError, match=message):
        dataclasses.replace(fake_track.TRACK, **fields)


def test_setting_values_take_their_default_s_type():
    track = fake_track.TRACK
    assert track.setting_value("dim", " 16") == 16 and track.setting_value("dim", 16) == 16
    for bad in ("16.0", 16.0, True, "sixteen"):
        with pytest.raises(ValueError, match="expected int like its default 8"):
            track.setting_value("dim", bad)
    assert track.with_settings({"dim": "8"}) is track
    with pytest.raises(
        ValueError, match=r"^track 'mqar' with embed_dim=33: embed_dim=33 must be divisible by"
    ):
        # the plugin's refusal, in one line
        load_registry().track("mqar").with_settings({"embed_dim": 33})


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--set", "dim"], "--set 'dim'; expected NAME=VALUE"),
        (["--set", "dim=4", "--set", "dim=8"], "--set names 'dim' twice"),
        (
            ["--set", "width=4"],
            "track 'fake' has no setting 'width'; its settings are dim (and grid)",
        ),
    ],
)
def test_gridmix_run_set_is_refused_in_one_line(tmp_path, arguments, message):
    result = CliRunner().invoke(
        app,
        ["run", "--track", "fake", "--budget", "smoke", *arguments, "--out", str(tmp_path / "out")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert message in result.output


def test_gridmix_sweep_on_the_command_line_writes_its_report_and_resumes(tmp_path):
    arguments = [
        "sweep",
        "--track",
        "fake",
        "--over",
        "dim=4,8",
        "--grid",
        "16",
        "--models",
        "fake-attention",
        "--budget",
        "smoke",
        "--threads",
        "1",
        "--out",
        str(tmp_path),
    ]
    result = CliRunner().invoke(app, arguments, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "2 points over dim=4,8" in result.output and "fake sweep — test MSE" in result.output
    assert "TextTable(" not in result.output  # the table itself, not its dataclass's repr
    document = json.loads((tmp_path / "sweep_report.json").read_text())
    assert [point["values"] for point in document["points"]] == [{"dim": 4}, {"dim": 8}]
    assert {point["grid"] for point in document["points"]} == {"16"}
    again = CliRunner().invoke(app, arguments, env={"COLUMNS": "200"})
    assert again.exit_code == 0 and "done " not in again.output  # nothing left to train
    assert json.loads((tmp_path / "sweep_report.json").read_text())["points"] == document["points"]
