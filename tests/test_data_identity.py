"""Data identity: the fingerprint of a track's data enters the run keys and the study, so a re-run
on other data (a swapped or edited CSV, changed plugin output) is refused in one line instead of
answered with the old data's numbers; ``--fresh`` starts over; the report names the data and the
code."""

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.study.fingerprint import data_fingerprint, describe_change
from gridmix.study.spec import Study
from gridmix.tracks.budget import BUDGETS
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track

SIZES = BUDGETS["smoke"].sizes


@pytest.fixture
def registry():
    yield load_registry(extra_plugins=[fake_track], refresh=True)
    load_registry(refresh=True)


def write_series(path, offset: float) -> str:
    path.write_text(
        "value\n" + "\n".join(f"{(i % 17) * 0.1 + offset * (i % 5)}" for i in range(300)) + "\n"
    )
    return str(path)


def test_fingerprint_is_stable_and_tracks_data_plugin_and_source(registry, tmp_path):
    track = registry.track("fake")
    first = data_fingerprint(track, Grid((8,)), SIZES)
    assert first == data_fingerprint(track, Grid((8,)), SIZES)  # deterministic
    assert first["sizes"] == {"train": SIZES.n_train, "val": SIZES.n_val, "test": SIZES.n_test}
    assert first["source"] is None and first["plugin"] == "tests.fake_track"

    def shifted(grid, seed, sizes):
        data = fake_track.make_data(grid, seed, sizes)
        return dataclasses.replace(
            data, test=dataclasses.replace(data.test, targets=data.test.targets + 1e-3)
        )

    edited = data_fingerprint(dataclasses.replace(track, make_data=shifted), Grid((8,)), SIZES)
    assert edited["hash"] != first["hash"] and "data hash" in describe_change(first, edited)
    bumped = data_fingerprint(dataclasses.replace(track, plugin_version="9.9"), Grid((8,)), SIZES)
    assert "plugin version" in describe_change(first, bumped)
    source = tmp_path / "series.csv"
    source.write_text("1\n2\n")
    with_file = data_fingerprint(dataclasses.replace(track, source=str(source)), Grid((8,)), SIZES)
    source.write_text("1\n3\n")
    edited_file = data_fingerprint(
        dataclasses.replace(track, source=str(source)), Grid((8,)), SIZES
    )
    assert "source file hash" in describe_change(with_file, edited_file)


def test_run_keys_depend_on_the_data(registry):
    track = registry.track("fake")
    spec = dict(
        track="fake",
        grid="8",
        models=("fake-mixer", "fake-attention"),
        idea="fake-mixer",
        matched_baseline="fake-attention",
        metric_name="test MSE",
        direction="lower",
        budget=BUDGETS["smoke"],
        device="cpu",
        threads=1,
    )
    one = Study(**spec, data=data_fingerprint(track, Grid((8,)), SIZES))
    other = Study(**spec, data=dict(one.data, hash="0" * 16))
    assert one.task("fake-mixer", 1e-3, 0).key != other.task("fake-mixer", 1e-3, 0).key
    assert Study.from_dict(json.loads(json.dumps(one.to_dict()))) == one


def run(out, csv, monkeypatch, *extra):
    monkeypatch.setenv("GRIDMIX_SEQUENCE_CSV", csv)
    load_registry(refresh=True)  # the plugin reads its file when the registry loads
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
            "--out",
            str(out),
            *extra,
        ],
        env={"COLUMNS": "200"},
    )


def test_swapped_csv_is_refused_and_fresh_starts_a_new_study(tmp_path, monkeypatch):
    out = tmp_path / "out"
    first_csv, second_csv = (
        write_series(tmp_path / "a.csv", 0.0),
        write_series(tmp_path / "b.csv", 1.0),
    )
    try:
        first = run(out, first_csv, monkeypatch)
        assert first.exit_code == 0, first.output
        report = json.loads((out / "bench_report.json").read_text())
        assert report["data"]["source"] == str((tmp_path / "a.csv").resolve())
        assert report["data"]["sizes"]["train"] > 0 and report["code"]["gridmix"]
        assert "## Data and code" in (out / "report.md").read_text()

        swapped = run(out, second_csv, monkeypatch)
        assert swapped.exit_code == 2
        assert (
            "holds results on other data" in swapped.output and "source file hash" in swapped.output
        )
        assert "--fresh" in swapped.output and len(swapped.output.strip().splitlines()) == 1
        # nothing was overwritten
        assert json.loads((out / "bench_report.json").read_text()) == report

        fresh = run(out, second_csv, monkeypatch, "--fresh")
        assert fresh.exit_code == 0, fresh.output
        renewed = json.loads((out / "bench_report.json").read_text())
        assert (
            renewed["data"]["source"].endswith("b.csv")
            and renewed["data"]["hash"] != report["data"]["hash"]
        )
        # trained again, on the new data
        assert renewed["idea"]["per_seed"] != report["idea"]["per_seed"]
    finally:
        monkeypatch.undo()
        load_registry(refresh=True)
