"""The learnability check for a track's author: ``gridmix run --without-idea`` trains the baselines
alone at an exploratory budget (per-model results, no paired verdict), and ``--stop-above-chance
MARGIN`` stops each run once its validation metric is beyond chance by the margin, the ledger row
saying why; run keys of ordinary runs stay as they were."""

import json

import pytest
from typer.testing import CliRunner

from gridmix.cli import app
from gridmix.study.ledger import Ledger
from gridmix.study.spec import Study
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track
from tests.test_verdicts import ClearPlugin, fake_budget

# the "clear-chance" track: test MSE, chance 2.5, targets of variance 9/8, smoke budget 2 epochs
SMOKE = ("--track", "clear-chance", "--budget", "smoke", "--lrs", "1e-2")


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[ClearPlugin(), fake_track], refresh=True)
    load_registry(refresh=True)


def run(*args):
    return CliRunner().invoke(
        app, ["run", "--no-scaling", "--threads", "1", *args], env={"COLUMNS": "200"}
    )


def test_the_baseline_runs_without_the_idea_and_stops_once_it_leaves_chance(tmp_path):
    # an untrained model's MSE (about 1.1) is already 0.5 below chance 2.5: every run stops after
    # its first epoch
    out = tmp_path / "out"
    result = run(*SMOKE, "--models", "one-token", "--without-idea", "--stop-above-chance", "0.5",
                 "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "no paired verdict" in result.output and "2 of 2 seeds beyond chance" in result.output
    with Ledger(out, create=False) as ledger:
        rows = ledger.rows()
    assert {row.model for row in rows} == {"one-token"} and len(rows) == 2
    for row in rows:
        assert row.epochs_done == 1 and row.config["stop_at"] == 2.0
        assert row.extras["training"]["stop_reason"].startswith("left chance at epoch 0")
    summary = json.loads((out / "learnability.json").read_text())
    assert [m["model"] for m in summary["models"]] == ["one-token"]
    assert summary["verdict"].startswith("no paired verdict") and summary["margin"] == 0.5
    assert not (out / "bench_report.json").exists()
    report = (out / "report.md").read_text()
    assert "no paired verdict" in report and "one-token seed 0: left chance at epoch 0" in report
    # the report command rebuilds the same summary from the ledger
    again = CliRunner().invoke(app, ["report", str(out)], env={"COLUMNS": "200"})
    assert again.exit_code == 0 and "one-token (baseline" in again.output
    assert (out / "report.md").read_text() == report


def test_a_margin_never_reached_trains_the_whole_budget_and_says_no_run_stopped(tmp_path):
    out = tmp_path / "out"
    result = run(*SMOKE, "--models", "one-token,no-mix", "--without-idea",
                 "--stop-above-chance", "2.5", "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output  # an MSE of 0 is never reached
    with Ledger(out, create=False) as ledger:
        rows = ledger.rows()
    assert {row.model for row in rows} == {"one-token", "no-mix"}
    assert all(row.epochs_done == 2 and "stop_reason" not in row.extras["training"] for row in rows)
    assert "0 run(s) stopped on leaving chance" in result.output


def test_a_paired_study_with_the_margin_says_so_in_its_report(tmp_path):
    out = tmp_path / "out"
    result = run(*SMOKE, "--models", "one-token", "--stop-above-chance", "0.5", "--out", str(out))
    assert result.exit_code == 0, result.output
    with Ledger(out, create=False) as ledger:
        assert {row.model for row in ledger.rows()} == {"mixer", "one-token"}
    assert "every run stopped once its validation metric was 0.5 beyond chance 2.5" in (
        (out / "report.md").read_text()
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (("--track", "clear-chance", "--models", "one-token", "--without-idea"),
         "--without-idea with budget 'default'; expected an exploratory budget"),
        ((*SMOKE, "--without-idea"), "--without-idea trains the --models given"),
        ((*SMOKE, "--models", "mixer,one-token", "--without-idea"),
         "without the idea 'mixer'"),
        (("--track", "clear", "--budget", "smoke", "--stop-above-chance", "0.1"),
         "track 'clear' declares no chance level"),
        ((*SMOKE, "--stop-above-chance", "-1"), "--stop-above-chance -1.0; expected a positive"),
    ],
)  # fmt: skip
def test_bad_uses_are_refused_in_one_line_before_any_training(tmp_path, args, message):
    result = run(*args, "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_ordinary_run_keys_and_specs_do_not_change():
    fields = dict(
        track="fake",
        grid="8",
        models=("fake-mixer", "fake-attention"),
        idea="fake-mixer",
        matched_baseline="fake-attention",
        metric_name="test MSE",
        direction="lower",
        device="cpu",
        threads=1,
        budget=fake_budget(),
        chance=0.6,
    )
    plain = Study(**fields)
    task = plain.task("fake-attention", 1e-3, 0)
    assert "stop_at" not in task.config and "stop_above_chance" not in plain.to_dict()
    stopping = Study(**fields, stop_above_chance=0.1)
    assert stopping.task("fake-attention", 1e-3, 0).config == dict(task.config, stop_at=0.5)
    assert stopping.task("fake-attention", 1e-3, 0).key != task.key
    assert Study.from_dict(stopping.to_dict()) == stopping
