"""The CSV forecasting track on real-format files: MASE as the M4 competition defines it, checked by
hand; the multivariate (date column + channels, chosen target) layout through the real loader and
`gridmix run`; every bad input in one line."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from gridmix_tracks import sequence_csv
from gridmix_tracks.sequence_csv import csv_sequence_track, mase, mase_scale, read_csv_series
from typer.testing import CliRunner

from gridmix.analysis.references import chance_level, naive_references
from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes
from gridmix.tracks.plugin_loader import load_registry, validate_data

SIZES = DataSizes(n_train=64, n_val=32, n_test=32)
ENVS = (sequence_csv.ENV, sequence_csv.TARGET_ENV, sequence_csv.INPUTS_ENV, sequence_csv.SEASON_ENV)


@pytest.fixture
def csv_env(monkeypatch):
    for name in (*ENVS, "GRIDMIX_PLUGINS", "GRIDMIX_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch
    monkeypatch.undo()
    load_registry(refresh=True)


def write_ett_like(path, n=240, *, trend=0.02):
    """An hourly ETT-like file: date, two load channels, and the target OT, which follows HUFL two
    hours later."""
    t = np.arange(n)
    rng = np.random.default_rng(0)
    hufl = np.sin(2 * np.pi * t / 24) + 0.1 * rng.normal(size=n)
    lufl = np.cos(2 * np.pi * t / 12) + 0.1 * rng.normal(size=n)
    ot = np.roll(hufl, 2) + trend * t
    dates = np.datetime64("2016-07-01T00:00") + t.astype("timedelta64[h]")
    lines = ["date,HUFL,LUFL,OT"] + [
        f"{str(d).replace('T', ' ')}:00,{a:.5f},{b:.5f},{c:.5f}"
        for d, a, b, c in zip(dates, hufl, lufl, ot)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_mase_scale_and_mase_by_hand():
    assert mase_scale(np.array([1.0, 3.0, 2.0, 6.0])) == pytest.approx(7 / 3)  # |2|, |-1|, |4|
    # |2-1|, |6-3|
    assert mase_scale(np.array([1.0, 3.0, 2.0, 6.0]), season=2) == pytest.approx(2.0)
    predictions, targets = (
        torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
        torch.tensor([[2.0, 2.0], [3.0, 1.0]]),
    )
    # MAE (1 + 0 + 0 + 3) / 4 = 1
    assert mase(7 / 3)(predictions, targets) == pytest.approx(1.0 / (7 / 3))
    with pytest.raises(ValueError, match="MASE needs more than season 4 training values; got 3"):
        mase_scale(np.array([1.0, 2.0, 3.0]), season=4)


def test_mase_of_persistence_equals_the_raw_unit_computation(tmp_path):
    # A trending noisy series: MASE is scale-free, so the track (which standardises) must agree with
    # numpy on the raw values: persistence's test MAE over every window and step ahead / the
    # training part's naive MAE.
    n, context, horizon = 300, 16, 16
    rng = np.random.default_rng(1)
    raw = 5.0 + 0.05 * np.arange(n) + rng.normal(size=n).cumsum() * 0.3
    path = tmp_path / "trend.csv"
    path.write_text("value\n" + "\n".join(f"{v:.6f}" for v in raw))
    track = csv_sequence_track(path)
    refs = naive_references(track, Grid((context,)), DataSizes(999, 999, 999))
    start_val, start_test = int(0.7 * n), int(0.85 * n)
    starts = np.arange(max(context, start_test), n - horizon + 1)
    errors = np.abs(raw[starts[:, None] + np.arange(horizon)] - raw[starts - 1][:, None])  # (W, H)
    expected = errors.mean() / np.abs(np.diff(raw[:start_val])).mean()
    assert refs["extra_metrics"]["persistence"]["MASE (m=1)"] == pytest.approx(expected, rel=1e-4)
    season = csv_sequence_track(path, season=12)
    assert list(season.extra_metrics) == ["MASE (m=12)"]


def test_multivariate_windows_read_every_channel_with_the_target_first(tmp_path):
    path = write_ett_like(tmp_path / "ett.csv")
    series = read_csv_series(path, "OT", inputs="all")
    assert series.names == ("OT", "HUFL", "LUFL") and series.values.shape == (240, 3)
    track = csv_sequence_track(path, "OT", inputs="all", horizon=4)
    assert "column 'OT'" in track.description and "all 3 channels" in track.description
    data = track.make_data(Grid((16,)), 0, SIZES)
    validate_data(track, data, Grid((16,)))
    assert data.train.inputs.shape == (64, 3, 16) and data.test.targets.shape == (32, 4)
    # Channel 0 is OT's own past (standardised with the training part), the others its covariates.
    raw = series.values
    train = raw[: int(0.7 * 240)]
    standard = (raw - train.mean(0)) / train.std(0)
    first_test_target = int(
        np.flatnonzero(np.isclose(standard[:, 0], data.test.targets[0, 0].item(), atol=1e-5))[0]
    )
    window = standard[first_test_target - 16 : first_test_target]  # (L, C)
    assert torch.allclose(data.test.inputs[0], torch.from_numpy(window.T).float(), atol=1e-5)
    model = track.model("transformer").build(Grid((16,)))
    assert model(data.test.inputs[:2]).shape == (2, 4)
    univariate = csv_sequence_track(path, "OT", horizon=4).make_data(Grid((16,)), 0, SIZES)
    assert univariate.train.inputs.shape == (64, 1, 16)
    # same windows, same split
    assert torch.equal(univariate.train.inputs[:, 0], data.train.inputs[:, 0])


@pytest.mark.parametrize(
    ("text", "target", "message"),
    [
        ("date,a,b\n2020-01-01,1,2\n2020-01-02,2,3\n", "OT", "no column 'OT'; columns: date, a, b"),
        (
            "date,a,b\n2020-01-01,1,2\n2020-01-02,x,3\n",
            "b",
            "row 3, column 'a': 'x' is not a number",
        ),
        ("date,a,b\n2020-01-01,1,2\n2020-01-02,,3\n", "b", "row 3, column 'a': missing value ''"),
        (
            "t,a,b\n0,1,2\n1,2,3\n",
            "b",
            "needs a date column first (date,channel,…,target as ETT keeps it); row 2, "
            "column 't': '0' is not a date; accepted: ISO 8601",
        ),
        ("a,b\n1,2\n2,3\n", "b", "row 2, column 'a': '1' is not a date; accepted: ISO 8601"),
        (
            "date,a,b\n2020-01-02,1,2\n2020-01-01,2,3\n",
            "b",
            "row 3, column 'date': '2020-01-01' does not come after "
            "'2020-01-02'; rows must be in time order",
        ),
        (
            "date,a,b\n2020-01-01,1,2\n2020-01-02,2,3\n",
            "date",
            "the target 'date' is the date column; choose one of the channels a, b",
        ),
    ],
)
def test_multivariate_bad_input_is_one_line(tmp_path, text, target, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        read_csv_series(path, target, inputs="all")
    assert message in str(error.value) and "\n" not in str(error.value)


def test_too_few_rows_and_bad_options_are_one_line(tmp_path, csv_env):
    short = write_ett_like(tmp_path / "short.csv", n=60)
    track = csv_sequence_track(short, "OT", inputs="all")
    with pytest.raises(
        ValueError, match="a series of 60 values is too short for context 64 \\+ horizon 16"
    ):
        track.make_data(Grid((64,)), 0, SIZES)
    with pytest.raises(
        ValueError, match=r"GRIDMIX_SEQUENCE_CSV_INPUTS='some'; expected one of \('target', 'all'\)"
    ):
        read_csv_series(short, inputs="some")
    csv_env.setenv(sequence_csv.ENV, str(short))
    csv_env.setenv(sequence_csv.SEASON_ENV, "0")
    registry = load_registry(refresh=True)
    assert [(b.name, b.error) for b in registry.broken] == [
        (
            "sequence-csv",
            "ValueError: GRIDMIX_SEQUENCE_CSV_SEASON='0'; expected a whole number of steps >= 1 "
            "(1: the previous value)",
        )
    ]


def run_smoke(tmp_path, *extra):
    return CliRunner().invoke(
        app,
        [
            "run",
            "--track",
            "sequence-csv",
            "--budget",
            "smoke",
            "--no-scaling",
            "--threads",
            "1",
            "--grid",
            "16",
            "--out",
            str(tmp_path / "out"),
            *extra,
        ],
        env={"COLUMNS": "300"},
    )


def test_gridmix_run_on_a_multivariate_csv_reports_mase_per_model(tmp_path, csv_env, one_thread):
    path = write_ett_like(tmp_path / "ett.csv")
    csv_env.setenv(sequence_csv.TARGET_ENV, "OT")
    csv_env.setenv(sequence_csv.INPUTS_ENV, "all")
    result = run_smoke(tmp_path, "--data", str(path))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    refs = report["references"]
    assert set(refs["models"]) == set(report["baselines"]) | {report["idea"]["name"]}
    for metrics in refs["models"].values():
        assert metrics["MASE (m=1)"] > 0
    assert refs["extra_metrics"]["persistence"]["MASE (m=1)"] > 0
    assert set(refs["values"]) == {
        "training mean",
        "persistence",
        "seasonal naive",
        "ridge autoregression",
    }
    assert refs["seeds"] == [0, 1] and refs["fixed_split"]
    # one number, on the test windows
    assert report["chance"] == pytest.approx(refs["values"]["training mean"])
    assert set(report["reference_comparisons"]) == set(refs["models"])
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| reference | test MSE (mean over seeds) | per seed | chosen | MASE (m=1) |" in text
    assert "MASE (m=1) (mean over seeds)" in text and "test MSE / persistence" in text


def test_gridmix_run_refuses_a_csv_without_a_date_column_in_one_line(tmp_path, csv_env):
    path = tmp_path / "nodate.csv"
    path.write_text("a,b\n" + "".join(f"{i},{i % 5}\n" for i in range(200)))
    csv_env.setenv(sequence_csv.INPUTS_ENV, "all")
    result = run_smoke(tmp_path, "--data", str(path))
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "is not a date; accepted: ISO 8601" in result.output and "1959-Q1" in result.output


def test_a_linear_series_report_says_the_ridge_reference_beats_every_model(
    tmp_path, csv_env, one_thread
):
    # An AR(2) series: a linear forecast from the window is the best there is, and two smoke epochs
    # of a transformer do not reach it. With 6 seeds the per-seed test against the reference can say
    # so.
    rng = np.random.default_rng(3)
    x = np.zeros(700)
    for i in range(2, x.size):
        x[i] = 1.6 * x[i - 1] - 0.8 * x[i - 2] + rng.normal()
    path = tmp_path / "ar.csv"
    path.write_text("value\n" + "\n".join(f"{v:.6f}" for v in x[100:]))
    result = run_smoke(tmp_path, "--data", str(path), "--seeds", "6")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    ridge = report["references"]["values"]["ridge autoregression"]
    assert ridge == min(report["references"]["values"].values())
    for name, comparison in report["reference_comparisons"].items():
        assert comparison["b"] == "ridge autoregression" and comparison["idea_wins"] == 0, name
        assert comparison["p_value"] == 2 / 64 and comparison["verdict"].endswith(
            " worse (significant)"
        )
        # the models' MSE above the reference's on every seed
        assert comparison["signflip_ci_low"] > 0
    text = (tmp_path / "out" / "report.md").read_text()
    assert re.search(
        r"\*\*Best reference: ridge autoregression \(on [a-z -]+ inputs; test MSE [0-9.]+, mean "
        r"over "
        r"seeds\): the idea loses to it \(Δ = [0-9.]+, p = 0.03125\) and the matched baseline "
        r"transformer "
        r"loses to it \(Δ = [0-9.]+, p = 0.03125\)",
        text,
    )


DATE_FORMS = {  # row i's date in each common form
    "quarters": lambda i: f"{1959 + i // 4}-Q{i % 4 + 1}",
    "quarters without a dash": lambda i: f"{1959 + i // 4}Q{i % 4 + 1}",
    "quarters with a space": lambda i: f"{1959 + i // 4} Q{i % 4 + 1}",
    "months": lambda i: f"{1959 + i // 12}-{i % 12 + 1:02d}",
    "years": lambda i: f"{1959 + i}",
}


@pytest.mark.parametrize("form", list(DATE_FORMS))
def test_common_date_forms_parse_in_order(tmp_path, form):
    path = tmp_path / "dated.csv"
    path.write_text(
        "date,x,y\n"
        + "".join(f"{DATE_FORMS[form](i)},{i % 3}.0,{(i * 7) % 5}.0\n" for i in range(60))
    )
    series = read_csv_series(path, "y", inputs="all")
    assert series.names == ("y", "x") and series.values.shape == (60, 2)
    assert series.values[:3, 0].tolist() == [0.0, 2.0, 4.0]


def test_dates_out_of_order_in_another_form_are_refused_naming_the_row(tmp_path):
    path = tmp_path / "dated.csv"
    path.write_text("date,x,y\n1959-Q1,1,2\n1959-Q3,1,2\n1959-Q2,1,2\n")
    with pytest.raises(
        ValueError, match="row 4, column 'date': '1959-Q2' does not come after '1959-Q3'"
    ):
        read_csv_series(path, "y", inputs="all")
    path.write_text("date,x,y\n1959-13,1,2\n")
    with pytest.raises(
        ValueError,
        match="'1959-13' is not a date; accepted: ISO 8601 .* a quarter .1959-Q1, 1959Q1",
    ):
        read_csv_series(path, "y", inputs="all")


def test_the_csv_track_derives_chance_from_its_data_and_offers_its_season(tmp_path):
    t = np.arange(400)
    values = np.sin(2 * np.pi * t / 7) + 0.01 * t
    path = tmp_path / "weekly.csv"
    path.write_text("value\n" + "\n".join(f"{v:.6f}" for v in values))
    track = csv_sequence_track(path, season=7)
    test = track.make_data(Grid((16,)), 0, SIZES).test
    # the training part's mean, once standardised
    assert track.chance is None and track.training_mean == 0.0
    assert chance_level(track, Grid((16,)), SIZES) == pytest.approx(
        float((test.targets.double() ** 2).mean())
    )
    assert (
        track.ceiling is None and track.seasons == (7,) and csv_sequence_track(path).seasons == ()
    )
    budget = track.budget("default")
    assert budget.patience == 4 and budget.epochs == 20 and len(budget.lrs) >= 3


def one_column_with_an_empty_cell(row: int, n: int = 200) -> str:
    """A header and ``n`` values, one of them missing: its line (``row``, 1 = the header) is
    empty."""
    lines = ["value"] + [f"{i % 7}.0" for i in range(n)]
    lines[row - 1] = ""
    return "\n".join(lines) + "\n"


ROW_PROBLEMS = {  # (file, target, inputs, message)
    "one column, empty cell at row 102": (
        one_column_with_an_empty_cell(102),
        None,
        "target",
        "row 102 is empty (in a one-column file, a missing value)",
    ),
    "one column, empty last row": ("value\n1\n2\n3\n\n", None, "target", "row 5 is empty"),
    "univariate, missing date": (
        "date,y\n2020-01-01,1\n,2\n2020-01-03,3\n",
        "y",
        "target",
        "row 3, column 'date': missing date",
    ),
    "univariate, dates out of order": (
        "date,y\n2020-01-02,1\n2020-01-01,2\n",
        "y",
        "target",
        "row 3, column 'date': '2020-01-01' does not come after '2020-01-02'; rows "
        "must be in time order",
    ),
    "univariate, no header, date repeated": (
        "2020-01-01,1\n2020-01-01,2\n",
        "1",
        "target",
        "row 2, column '0': '2020-01-01' does not come after",
    ),
    "univariate, years out of order": (
        "year,y\n1959,1\n1961,2\n1960,3\n",
        "y",
        "target",
        "row 4, column 'year': '1960' does not come after '1961'",
    ),
    "univariate, not a date": (
        "date,y\n2020-01-01,1\n2020-01-02,2\nsoon,3\n",
        "y",
        "target",
        "row 4, column 'date': 'soon' is not a date",
    ),
    "univariate, empty row": (
        "date,y\n2020-01-01,1\n\n2020-01-02,2\n",
        "y",
        "target",
        "row 3 is empty",
    ),
    "multivariate, missing date": (
        "date,a,b\n2020-01-01,1,2\n,2,3\n",
        "b",
        "all",
        "row 3, column 'date': missing date",
    ),
    "multivariate, empty row": (
        "date,a,b\n2020-01-01,1,2\n\n2020-01-02,2,3\n",
        "b",
        "all",
        "row 3 is empty",
    ),
}


@pytest.mark.parametrize(
    ("text", "target", "inputs", "message"), list(ROW_PROBLEMS.values()), ids=list(ROW_PROBLEMS)
)
def test_no_row_is_dropped_or_reordered_silently(tmp_path, text, target, inputs, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        read_csv_series(path, target, inputs=inputs)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_univariate_first_column_of_plain_numbers_is_no_date_column(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text("id,y\n3,1\n1,2\n2,3\n")  # an unordered id column the models never read
    assert read_csv_series(path, "y").values[:, 0].tolist() == [1.0, 2.0, 3.0]
