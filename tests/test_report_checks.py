"""The checks and labels around the statistics, on synthetic reports built from the example study
(tests/report_example.py): floor and ceiling flags on the data's own scale, the headline naming an
arm that beats the idea, the training checks, the small-split warning and the plain labels of the
references table."""

from __future__ import annotations

import dataclasses

from gridmix.report.build import build_report
from gridmix.report.markdown import render_markdown
from gridmix.report.reference_lines import training_flags, training_lines
from gridmix.study.ledger import Ledger
from tests import report_example

IDEA, BASE = "mix", "base"


def build(
    out,
    monkeypatch,
    arms: dict | None = None,
    *,
    chance=None,
    ceiling=None,
    change_row=None,
    budget: dict | None = None,
    sizes: dict | None = None,
):
    """The example study's report with other final values per arm (``arms``: name -> per-seed
    values), another chance level and ceiling, each comparison run rewritten by ``change_row``,
    budget fields and split sizes."""
    if arms:
        monkeypatch.setattr(
            report_example,
            "ARMS",
            {
                name: (role, arms.get(name, values))
                for name, (role, values) in report_example.ARMS.items()
            },
        )
    if chance is not None:
        monkeypatch.setattr(report_example, "CHANCE", chance)
    monkeypatch.setattr(report_example, "CEILING", ceiling)
    if budget:
        monkeypatch.setattr(
            report_example, "BUDGET", dataclasses.replace(report_example.BUDGET, **budget)
        )
    if sizes:
        monkeypatch.setattr(
            report_example, "FINGERPRINT", dict(report_example.FINGERPRINT, sizes=sizes)
        )
    with Ledger(report_example.fill(out), create=False) as ledger:
        for row in ledger.rows():
            if change_row and row.seed < 100 and row.status == "ok":
                ledger.record(change_row(row))
        return build_report(ledger)


# --- floor and ceiling
# ------------------------------------------------------------------------------------------


def test_a_drifting_series_near_a_zero_error_ceiling_is_not_at_ceiling(tmp_path, monkeypatch):
    """Weekly CO2-like: chance 11.18 makes 0.5 % of the range 0.056, wider than every arm's error
    (~0.05); the arms' seeds sit off 0 by far more than their spread, so none is at ceiling and the
    null reads as one."""
    arms = {
        IDEA: [0.0512, 0.0520, 0.0509, 0.0517, 0.0511, 0.0515],
        BASE: [0.0514, 0.0511, 0.0516, 0.0510, 0.0519, 0.0513],
        "uncapped": [0.0513, 0.0518, 0.0510, 0.0512, 0.0516, 0.0514],
    }
    report = build(tmp_path, monkeypatch, arms, chance=11.18, ceiling=0.0)
    assert [arm.flag for arm in report.arms.values()] == [None] * 5
    assert report.verdict == "no significant difference"
    assert not any(
        c.verdict.startswith("uninformative")
        for c in [*report.comparisons.values(), *report.mechanism.values()]
    )
    assert "every seed at ceiling" not in render_markdown(report)


def test_arms_at_a_ceiling_that_differ_by_more_than_the_mde_are_compared(tmp_path, monkeypatch):
    """Both arms within the ceiling band and within two seed spreads of it, but 0.0015 apart on
    every seed, far beyond the MDE: the test decides, not the flags."""
    idea = [0.0, 0.003, 0.0, 0.003, 0.0, 0.003]
    base = [v + step for v, step in zip(idea, [0.0015, 0.0015, 0.0016, 0.0016, 0.0014, 0.0014])]
    report = build(tmp_path, monkeypatch, {IDEA: idea, BASE: base}, ceiling=0.0)
    assert report.arms[IDEA].flag == report.arms[BASE].flag == "at ceiling"
    result = report.comparison.result
    assert abs(result.delta_mean) > result.mde
    assert report.verdict == "idea better (significant)"


def test_arms_at_the_ceiling_within_the_mde_stay_uninformative(tmp_path, monkeypatch):
    idea = [0.0, 0.003, 0.001, 0.002, 0.0, 0.003]
    base = [0.002, 0.0, 0.003, 0.001, 0.003, 0.0]
    report = build(tmp_path, monkeypatch, {IDEA: idea, BASE: base}, ceiling=0.0)
    assert report.verdict == "uninformative: both arms at ceiling"


def test_an_arm_consistently_off_chance_by_more_than_its_spread_is_not_at_chance(
    tmp_path, monkeypatch
):
    """Within 5 % of the range of chance 2.5 (0.125), but 0.1 better than it on every seed, ±
    0.005."""
    report = build(
        tmp_path, monkeypatch, {"nomix": [2.40, 2.41, 2.39, 2.40, 2.405, 2.395]}, ceiling=0.0
    )
    assert report.arms["nomix"].flag is None
    worse = build(
        tmp_path / "worse", monkeypatch, {"nomix": [2.6, 2.7, 2.55, 2.8, 2.6, 2.65]}, ceiling=0.0
    )
    assert worse.arms["nomix"].flag == "at chance"  # worse than chance on every seed: at the floor


# --- the headline
# -----------------------------------------------------------------------------------------------


def test_the_headline_says_when_the_control_beats_the_idea_and_the_baseline(tmp_path, monkeypatch):
    """El Niño-like: no mixing beat the idea and the matched baseline on every seed (p = 2/64) while
    the primary comparison was a null; the headline says so with each p."""
    idea = [0.50, 0.52, 0.48, 0.51, 0.49, 0.50]
    arms = {
        IDEA: idea,
        BASE: [0.51, 0.50, 0.49, 0.52, 0.48, 0.51],
        "nomix": [v - 0.05 for v in idea],
    }
    report = build(tmp_path, monkeypatch, arms, ceiling=0.0)
    assert report.verdict == "no significant difference"
    headline = render_markdown(report).split("\n")[2]
    assert headline.startswith("**Verdict: no significant difference**")
    assert (
        "**⚠ Significantly better than the idea or its baseline: nomix (control) beats the idea "
        "(Δ = mix − nomix = 0.05, mix better on 0/6 seeds, p = 0.03125, alone at α); nomix "
        "(control) beats the baseline base " in headline
    )
    monkeypatch.undo()
    # the example: the control far worse than both
    quiet = build(tmp_path / "quiet", monkeypatch, ceiling=0.0)
    assert "Significantly better than the idea" not in render_markdown(quiet)


# --- training checks
# --------------------------------------------------------------------------------------------


def curves(make):
    """A ``change_row`` giving the idea's and the matched baseline's final runs the validation curve
    ``make(v)``."""

    def change(row):
        return (
            dataclasses.replace(row, val_curve=make(row.test_metric))
            if row.model in (IDEA, BASE)
            else row
        )

    return change


def training(report) -> str:
    return "\n".join(training_lines(report))


def test_runs_that_ran_every_epoch_despite_patience_are_counted_whatever_their_best_epoch(
    tmp_path, monkeypatch
):
    """22 of 24 real runs stopped at the cap; only those whose best was the last epoch were
    flagged."""
    report = build(
        tmp_path,
        monkeypatch,
        budget=dict(epochs=10, patience=3),
        change_row=curves(
            lambda v: [v + 0.5 - 0.1 * min(i, 5) for i in range(8)] + [v + 0.01, v + 0.02]
        ),
    )
    text = training(report)
    assert (
        "**Stopped by the epoch cap** (ran all 10 epochs without the 3 epochs without improvement "
        "that stop early"
        in text
        and "mix in 6 of 6 seeds, base in 6 of 6 seeds." in text
    )
    assert "Still improving" not in text  # their best epoch (the sixth) is not the last
    assert "mix ran into the epoch cap without early stopping on 6/6 seeds" in training_flags(
        report, [IDEA]
    )
    free = build(
        tmp_path / "free",
        monkeypatch,
        budget=dict(epochs=10, patience=None),
        change_row=curves(lambda v: [v + 0.5 - 0.1 * min(i, 5) for i in range(10)]),
    )
    # without patience every run runs the cap by design
    assert "Stopped by the epoch cap" not in training(free)


def test_a_best_first_epoch_and_overfitting_under_patience_are_flagged(tmp_path, monkeypatch):
    """Best after the first epoch, then 4 worse ones and early stopping (the best restored): flagged
    both ways."""
    report = build(
        tmp_path,
        monkeypatch,
        budget=dict(epochs=20, patience=4),
        change_row=curves(lambda v: [v, v + 0.1, v + 0.2, v + 0.3, v + 0.4]),
    )
    text = training(report)
    assert "**Best epoch in the first 10% of training** (of the cap of 20 epochs;" in text
    assert (
        "**Overfitting** (validation best in the first half of the epochs, then worse by more "
        "than the arm's seed spread by the last epoch; `patience` restored the best epoch's "
        "model, which was tested, but validation got worse after it): mix in 6 of 6 seeds, base "
        "in 6 of 6 seeds." in text
    )
    late = build(
        tmp_path / "late",
        monkeypatch,
        budget=dict(epochs=20, patience=4),
        change_row=curves(lambda v: [v + 0.5 - 0.1 * min(i, 5) for i in range(10)]),
    )
    assert "Best epoch in the first" not in training(late) and "Overfitting" not in training(late)


def test_small_validation_and_test_sets_are_warned_about(tmp_path, monkeypatch):
    report = build(tmp_path, monkeypatch, sizes=dict(train=300, val=15, test=32))
    assert "**Small evaluation sets**: val 15 items and test 32 items (under 50)" in training(
        report
    )
    large = build(tmp_path / "large", monkeypatch, sizes=dict(train=300, val=50, test=64))
    assert "Small evaluation sets" not in training(large)


# --- labels and the data
# ----------------------------------------------------------------------------------------


def test_the_references_table_says_model_beats_reference_not_arm_better(tmp_path, monkeypatch):
    from gridmix.report.reference_lines import reference_lines

    report = build(tmp_path, monkeypatch, ceiling=0.0)
    rows = {
        line.split(" | ")[0].strip("| "): line
        for line in reference_lines(report)
        if line.startswith("| ")
    }
    # 0.50 vs persistence 0.58
    assert rows[IDEA].endswith("| model beats reference (significant) | 0.862 | 0.25 |")
    # 2.5 vs 0.58: not "control worse"
    assert "| reference beats model (significant) |" in rows["nomix"]
    assert not any(
        "better (significant)" in line or "worse (significant)" in line for line in rows.values()
    )


def test_the_data_section_names_the_forecast_column_and_the_input_channels(tmp_path, monkeypatch):
    from gridmix_tracks.sequence_csv import csv_sequence_track

    from gridmix.core.grid import Grid
    from gridmix.study.fingerprint import data_fingerprint
    from gridmix.tracks import DataSizes

    path = tmp_path / "ett.csv"
    path.write_text(
        "date,HUFL,LUFL,OT\n"
        + "".join(
            f"2020-01-{1 + i // 24:02d}T{i % 24:02d}:00,{i % 7},{i % 5},{(i * 37) % 11}\n"
            for i in range(240)
        )
    )
    track = csv_sequence_track(path, "OT", inputs="all", horizon=4)
    fingerprint = data_fingerprint(track, Grid((16,)), DataSizes(n_train=64, n_val=32, n_test=32))
    assert "column 'OT'" in fingerprint["description"]
    assert "reading all 3 channels: 'OT' (the target), 'HUFL', 'LUFL'" in fingerprint["description"]
    monkeypatch.setattr(
        report_example,
        "FINGERPRINT",
        dict(report_example.FINGERPRINT, description=fingerprint["description"]),
    )
    section = render_markdown(build(tmp_path / "study", monkeypatch, ceiling=0.0)).split(
        "## Data and code"
    )[1]
    assert f"Task: {fingerprint['description']}." in section
    univariate = csv_sequence_track(path, "OT", horizon=4)
    assert "reading the target's past only" in univariate.description
