"""The time-left estimate: each pending run at its model's median finished time, shared by the
workers."""

import pytest

from gridmix.study.eta import RunClock, format_duration, time_left


def test_nothing_is_estimated_before_a_run_finishes():
    assert RunClock().remaining_s(["vit", "vit"]) is None


def test_pending_runs_take_their_models_median_time_or_the_overall_one():
    clock = RunClock(jobs=2)
    for seconds in (50.0, 56.0, 54.0):
        clock.record("vit", seconds)
    clock.record("vit-concentration", 8.0)
    clock.record("vit-tokenwise", 0.0)  # a run that failed before training: no time to learn from
    # vit: median 54; the idea: 8; the control has none of its own: the median of all four, (8 + 50
    # + 54 + 56) -> 52
    assert clock.remaining_s(["vit", "vit-concentration", "vit-tokenwise"]) == pytest.approx(
        (54 + 8 + 52) / 2
    )
    assert clock.untimed(["vit-tokenwise", "vit", "mlp-mixer", "vit-tokenwise"]) == [
        "vit-tokenwise",
        "mlp-mixer",
    ]
    with pytest.raises(ValueError, match="jobs=0; expected >= 1"):
        RunClock(jobs=0)


def test_durations_print_in_minutes_and_seconds():
    assert format_duration(35.4) == "35 s" and format_duration(250) == "4 min 10 s"
    assert format_duration(60) == "1 min 0 s" and format_duration(0.3) == "under 1 s"
    assert time_left(250) == "about 4 min 10 s left" and time_left(0.3) == "under 1 s left"


def test_a_piped_gridmix_run_prints_the_time_left_after_each_run(tmp_path):
    """Through the command line, as a log file sees it: every finished run's line ends with the
    estimate, the last one (nothing left) without."""
    from typer.testing import CliRunner

    from gridmix.cli import app
    from gridmix.tracks.plugin_loader import load_registry
    from tests import fake_track

    load_registry(extra_plugins=[fake_track], refresh=True)
    try:
        result = CliRunner().invoke(
            app,
            [
                "run",
                "--track",
                "fake",
                "--budget",
                "smoke",
                "--seeds",
                "2",
                "--threads",
                "1",
                "--no-scaling",
                "--out",
                str(tmp_path / "run"),
            ],
            env={"COLUMNS": "200"},
        )
    finally:
        load_registry(refresh=True)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("done ")]
    # three models: a sweep of two rates on one seed, then two seeds
    assert len(lines) == 3 * 2 + 3 * 2
    assert (
        all(" left" in line.rsplit("; ", 1)[-1] for line in lines[:-1]) and " left" not in lines[-1]
    )
    assert ("about " in lines[0] or "under 1 s left" in lines[0]) and (
        "min" in lines[0] or " s left" in lines[0]
    )
    assert "about under" not in result.output
    # the sweep's first run times one model: the others' runs are a guess, and the line says which
    assert lines[0].endswith(
        "fake-attention, fake-fragile not timed yet: counted at the median run so far)"
    )
    assert lines[-2].endswith(" s left")  # every model timed by then: a plain estimate


def test_a_model_whose_sweep_is_done_counts_only_the_comparison_runs_the_ledger_lacks(tmp_path):
    """A ledger holding every run but one model's sweep: only that model's sweep and its seeds are
    pending; the other models' rates are chosen, so their comparison runs are known to be done."""
    import sqlite3

    from gridmix.orchestrate.plan import plan_study
    from gridmix.study.ledger import Ledger
    from gridmix.study.spec import pending_models
    from tests.fake_track import smoke_study

    with smoke_study(tmp_path):
        study = plan_study("fake", None, budget="smoke", seeds=2, threads=1).study
        sweep_keys = {task.key for task in study.sweep_tasks() if task.model == "fake-attention"}
        with sqlite3.connect(tmp_path / "ledger.sqlite") as conn:
            conn.executemany("DELETE FROM runs WHERE key = ?", [(key,) for key in sweep_keys])
        with Ledger(tmp_path) as ledger:
            rows = {row.key: row for row in ledger.rows()}
    assert len(sweep_keys) == 2 and len(study.comparison_seeds) == 2
    assert sorted(pending_models(study, rows)) == ["fake-attention"] * 4
