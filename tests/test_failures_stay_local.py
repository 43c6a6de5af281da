"""Failures stay local and every exit status tells the truth: a failed scaling point, a broken
section or plot never costs the report; a bad CSV or a corrupt image is named by the command that
needs it; a piped run logs one line per finished run; Ctrl-C says how to resume; ``gridmix scale``
fails when no point was measured."""

import dataclasses
import json
import re
import types

import pytest
import typer
from PIL import Image
from typer.testing import CliRunner

from gridmix.analysis.scaling import ScalingPoint, ScalingResult
from gridmix.cli import app
from gridmix.cli.app import fail
from gridmix.report import markdown as report_markdown
from gridmix.report import plots as report_plots
from gridmix.study.ledger import Ledger
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track
from tests.test_ledger_files import RUN, study_spec


def failed_scaling() -> dict:
    failed = ScalingPoint(
        model="transformer",
        grid="100000",
        tokens=100000,
        skipped="failed: RuntimeError: not enough memory",
    )
    return ScalingResult(
        track="sequence",
        device="cpu",
        threads=1,
        batch=8,
        repeats=2,
        warmup=1,
        grids=["100000"],
        models=["transformer"],
        points=[failed],
        fits=[],
    ).to_dict()


def ledger_with(tmp_path, analyses: dict):
    with Ledger(tmp_path) as ledger:
        ledger.set_study(study_spec())
        ledger.put("analyses", analyses)
    return tmp_path


def test_report_is_written_with_a_failed_scaling_point_and_a_broken_section(tmp_path):
    # parity lacks its rows
    out = ledger_with(tmp_path, {"scaling": failed_scaling(), "parity": {"grid": "64"}})
    result = CliRunner().invoke(app, ["report", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    markdown = (out / "report.md").read_text()
    assert markdown.splitlines()[2].startswith("**Verdict: ")
    assert "| transformer | 100000 | – |" in markdown and "failed: RuntimeError" in markdown
    assert "## Parity\n\n– (this section could not be rendered: KeyError" in markdown
    assert "## Timings" in markdown  # the sections after the broken one are there
    assert (
        json.loads((out / "bench_report.json").read_text())["scaling"]["points"][0]["params"]
        is None
    )


def test_a_failing_plot_or_renderer_never_costs_report_md(tmp_path, monkeypatch):
    out = ledger_with(tmp_path, {})

    def broken(*args, **kwargs):
        raise RuntimeError("no backend")

    monkeypatch.setattr(report_plots, "figure_sweep", broken)
    assert CliRunner().invoke(app, ["report", str(out)]).exit_code == 0
    assert json.loads((out / "bench_report.json").read_text())["plot_errors"] == [
        "sweep plot: RuntimeError: no backend"
    ]
    assert "sweep plot: RuntimeError: no backend" in (out / "report.md").read_text()
    monkeypatch.setattr(report_markdown, "render_markdown", broken)
    assert CliRunner().invoke(app, ["report", str(out)]).exit_code == 0
    markdown = (out / "report.md").read_text()
    assert (
        "**Verdict: " in markdown and "could not be rendered (RuntimeError: no backend)" in markdown
    )


@pytest.fixture
def env_registry(monkeypatch):
    def use(name, value):
        monkeypatch.setenv(name, str(value))
        load_registry(refresh=True)

    yield use
    monkeypatch.undo()
    load_registry(refresh=True)


def test_bad_csv_error_is_the_plugins_own(tmp_path, env_registry):
    bad = tmp_path / "bad.csv"
    bad.write_text("value\n1\n2\n3\nabc\n")
    env_registry("GRIDMIX_SEQUENCE_CSV", bad)
    result = CliRunner().invoke(
        app, ["run", "--track", "sequence-csv", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 2 and "unknown track" not in result.output
    assert f"{bad}: row 5, column 'value': 'abc' is not a number" in result.output.replace("\n", "")


def test_corrupt_image_is_named_before_any_run(tmp_path, env_registry):
    for label in ("cat", "dog"):
        (tmp_path / "images" / label).mkdir(parents=True)
        for index in range(3):
            Image.new("RGB", (8, 8), (40 * index, 90, 0)).save(
                tmp_path / "images" / label / f"{index}.png"
            )
    corrupt = tmp_path / "images" / "dog" / "1.png"
    corrupt.write_bytes(b"\x89PNG not really")
    env_registry("GRIDMIX_IMAGE_FOLDER", tmp_path / "images")
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--track",
            "image-folder",
            "--grid",
            "8x8",
            "--budget",
            "smoke",
            "--out",
            str(tmp_path / "out"),
        ],
        env={"COLUMNS": "300"},
    )
    assert result.exit_code == 2, result.output
    assert f"{corrupt} is not a readable image (UnidentifiedImageError" in result.output.replace(
        "\n", ""
    )
    assert not (tmp_path / "out").exists()  # refused before the ledger


def test_piped_run_logs_one_unwrapped_line_per_run(tmp_path):
    result = CliRunner().invoke(app, [*RUN, "--out", str(tmp_path / "out")], env={"COLUMNS": "60"})
    assert result.exit_code == 0, result.output
    done = [line for line in result.output.splitlines() if line.startswith("done ")]
    with Ledger(tmp_path / "out", create=False) as ledger:
        # 2 models x 2 rates on sweep seed 1000, then seeds 0 and 1
        assert len(done) == len(ledger.rows()) == 8
    # the estimate names the models not timed yet
    ending = r" s(; (about .+|under 1 s) left( \(.+ not timed yet: .+\))?)?$"
    assert all(", test MSE " in line and re.search(ending, line) for line in done)
    assert done[-1].endswith(" s")  # nothing left after the last run: no estimate
    header = result.output.splitlines()[0]
    assert (
        header.startswith("gridmix run sequence 64")
        and header.endswith("ledger.sqlite")
        and len(header) > 60
    )


def test_ctrl_c_says_how_to_resume(tmp_path, monkeypatch):
    from gridmix.study import harness

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(harness.Runner, "run", interrupted)
    result = CliRunner().invoke(app, [*RUN, "--out", str(tmp_path / "out")], env={"COLUMNS": "300"})
    assert result.exit_code == 130
    assert "re-run the same command to resume" in result.output


def test_messages_keep_their_brackets(capsys):
    with pytest.raises(typer.Exit):
        fail("--executor ray needs Ray: pip install 'gridmix[ray]'")
    assert "pip install 'gridmix[ray]'" in capsys.readouterr().err


def broken_builds():
    def explode(grid, **model_kwargs):
        raise RuntimeError("this model cannot be built")

    models = tuple(dataclasses.replace(spec, build=explode) for spec in fake_track.TRACK.models)
    plugin = types.ModuleType("exploding_track")
    plugin.gridmix_tracks = hookimpl(
        lambda: [dataclasses.replace(fake_track.TRACK, name="exploding", models=models)]
    )
    return plugin


def test_scale_fails_when_no_point_was_measured(tmp_path):
    load_registry(extra_plugins=[broken_builds()], refresh=True)
    try:
        result = CliRunner().invoke(
            app,
            [
                "scale",
                "--track",
                "exploding",
                "--grids",
                "8",
                "--no-memory",
                "--repeats",
                "1",
                "--warmup",
                "0",
                "--out",
                str(tmp_path),
            ],
            env={"COLUMNS": "200"},
        )
    finally:
        load_registry(refresh=True)
    assert result.exit_code == 1, result.output
    assert "no point of 3 was measured" in result.output
    # one log line per point
    done = [line for line in result.output.splitlines() if line.startswith("done ")]
    assert len(done) == 3 and all(
        "failed: RuntimeError: this model cannot be built" in line for line in done
    )
