"""``gridmix run`` is ``gridmix.run`` called from Python (the front door,
:mod:`gridmix.orchestrate.front_door`): the same study on the fake track gives the same report
(timings aside), the callbacks see every run, user mistakes are one-line ``ValueError``s, and the
command line goes through the front door."""

import json

import pytest
from typer.testing import CliRunner

import gridmix
from gridmix import orchestrate
from gridmix.cli import app
from gridmix.report.build import TIMING_KEYS
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[fake_track], refresh=True)
    load_registry(refresh=True)


def comparable(out) -> dict:
    report = json.loads((out / "bench_report.json").read_text())
    return {key: value for key, value in report.items() if key not in TIMING_KEYS}


def test_gridmix_run_equals_the_front_door_called_from_python(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--track",
            "fake",
            "--budget",
            "smoke",
            "--seeds",
            "3",
            "--threads",
            "1",
            "--no-scaling",
            "--out",
            str(tmp_path / "cli"),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    done, notes, analyses, begun, finished = [], [], [], [], []
    callbacks = gridmix.Callbacks(
        note=notes.append,
        done=lambda task, row: done.append(task.key),
        analysis=analyses.append,
        begin=lambda planned, ledger: begun.append(ledger.path),
        finished=finished.append,
    )
    report = gridmix.run(
        "fake",
        out=tmp_path / "python",
        budget="smoke",
        seeds=3,
        threads=1,
        scaling=False,
        callbacks=callbacks,
    )
    assert comparable(tmp_path / "cli") == comparable(tmp_path / "python")
    assert report.to_dict() == json.loads((tmp_path / "python" / "bench_report.json").read_text())
    assert begun == [tmp_path / "python" / "ledger.sqlite"]
    assert (
        finished[0].report is report
        and finished[0].paths[0] == tmp_path / "python" / "bench_report.json"
    )
    # the sweep (one seed, two rates) and three seeds, 3 models
    assert len(done) == len(set(done)) == 3 * 2 + 3 * 3
    assert analyses == ["references"] and notes == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(track="nowhere"), "unknown track 'nowhere'"),
        (dict(track="fake", grid="8x8"), "track 'fake' takes 1-d grids"),
        (dict(track="fake", models="fake-nothing"), "track 'fake' has no model 'fake-nothing'"),
        (
            dict(track="fake", budget="default", seeds=3),
            "with 3 seeds the primary comparison cannot reach α",
        ),
    ],
)
def test_a_user_mistake_is_a_one_line_value_error_before_any_run(tmp_path, options, message):
    with pytest.raises(ValueError, match=message) as error:
        orchestrate.run(out=tmp_path / "out", **options)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "out").exists()


def test_an_underpowered_run_is_noted_not_refused():
    notes = []
    planned = orchestrate.plan_study(
        "fake", budget="default", seeds=3, underpowered=True, note=notes.append
    )
    assert planned.study.underpowered and notes[0].startswith(
        "--underpowered: 3 seeds cannot reach α"
    )


def test_a_resumed_study_with_its_analyses_stored_starts_no_memory_server(tmp_path, monkeypatch):
    from gridmix.analysis import scaling

    started = []
    original = scaling.MemoryProbe.start
    monkeypatch.setattr(
        scaling.MemoryProbe, "start", lambda probe: started.append(probe) or original(probe)
    )
    runs = []
    for _ in range(2):
        analyses = []
        orchestrate.run(
            "fake",
            out=tmp_path,
            budget="smoke",
            seeds=3,
            threads=1,
            callbacks=orchestrate.Callbacks(analysis=analyses.append),
        )
        runs.append((len(started), analyses))
    assert runs == [(1, ["references", "parity and scaling"]), (1, ["references"])]


def test_the_report_says_which_cpu_its_run_times_were_measured_on(tmp_path):
    from gridmix.mixers.concentration.ops.native_build import cpu_facts, cpu_line

    report = orchestrate.run(
        "fake", out=tmp_path, budget="smoke", seeds=3, threads=1, scaling=False
    )
    # e.g. "AMD EPYC … (family 25, model 1), CPU avx2, torch kernels AVX2"
    machine = cpu_line(cpu_facts())
    assert report.timings["machines"] == [machine]
    assert f"measured on {machine}." in (tmp_path / "report.md").read_text()


def test_gridmix_run_from_the_package_runs_a_study_and_returns_its_report(tmp_path):
    report = gridmix.run(
        track="image", grid="8x8", budget="smoke", out=tmp_path, scaling=False, threads=1, jobs=1
    )
    assert isinstance(report, gridmix.Report) and (report.track, report.grid) == ("image", "8x8")
    assert report.to_dict() == json.loads((tmp_path / "bench_report.json").read_text())
    assert report.idea_arm.n == report.baseline.n > 0  # trained and compared, not an empty report


def test_a_storage_error_is_one_line_naming_the_path(tmp_path, monkeypatch):
    import sqlite3

    from gridmix.study.ledger import Ledger

    def full_disk(self, row):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Ledger, "record", full_disk)
    with pytest.raises(orchestrate.StorageError) as error:
        gridmix.run("fake", out=tmp_path / "out", budget="smoke", seeds=3, threads=1, scaling=False)
    assert str(error.value) == f"{tmp_path / 'out'}: SQLite error: database or disk is full"
    assert isinstance(error.value, OSError)


@pytest.mark.parametrize(
    ("door", "what"), [("run", {"grid": "8"}), ("sweep", {"over": [("grid", ["8", "16"])]})]
)
def test_both_front_doors_take_where_and_how_to_run_alike(tmp_path, door, what):
    """``out``, ``fresh``, ``executor``, ``address`` and ``callbacks`` mean the same to both:
    planned, the ledger opened in ``out``, then the unknown executor refused."""
    with pytest.raises(ValueError, match="executor 'nowhere'; expected 'local' or 'ray'"):
        getattr(gridmix, door)(
            "fake",
            **what,
            out=tmp_path / door,
            fresh=True,
            executor="nowhere",
            address=None,
            callbacks=gridmix.Callbacks(),
            budget="smoke",
            seeds=3,
            threads=1,
        )
    assert any((tmp_path / door).iterdir())


@pytest.mark.parametrize(
    ("command", "door"),
    [
        (["run", "--track", "fake", "--budget", "smoke", "--seeds", "3"], "run"),
        (["sweep", "--track", "fake", "--over", "grid=8,16"], "sweep"),
    ],
)
def test_the_commands_call_the_front_door_once(monkeypatch, command, door):
    from gridmix.orchestrate import front_door

    assert getattr(gridmix, door) is getattr(front_door, door)
    calls = []

    def refuse(*args, **options):
        calls.append(options)
        raise ValueError("the front door was reached")

    monkeypatch.setattr(front_door, door, refuse)
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2 and "error: the front door was reached" in result.output, (
        result.output
    )
    assert (
        len(calls) == 1
        and calls[0]["track"] == "fake"
        and isinstance(calls[0]["callbacks"], gridmix.Callbacks)
    )


@pytest.mark.parametrize("name", ["run", "sweep"])
def test_the_command_functions_are_30_lines_or_fewer(name):
    """A command parses its options (its signature, :func:`typer.Option` each) and calls the front
    door: the body below its docstring is at most 30 lines."""
    import ast
    import importlib
    import inspect
    import textwrap

    function = getattr(importlib.import_module(f"gridmix.cli.{name}"), name)
    # below the docstring
    body = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0].body[1:]
    assert body[-1].end_lineno - body[0].lineno + 1 <= 30
