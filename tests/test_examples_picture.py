"""A track's generated examples picture: ``Track.draw_examples`` is drawn once per study into
``examples.png``, which ``report.md`` shows; a drawing that raises costs the report the picture
only, with the error recorded; ``recall``, ``pathfinder`` and ``occlusion`` each draw one."""

import dataclasses
import json
import types

import pytest
from gridmix_tracks import copy_track, occlusion, pathfinder, recall
from PIL import Image
from typer.testing import CliRunner

import gridmix
from gridmix.cli import app
from gridmix.report.build import build_report, write_report
from gridmix.study.ledger import Ledger
from gridmix.tracks import ContractError
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track
from tests.test_ledger_files import study_spec

LINK = (
    "## Generated examples\n\nA few samples the track generates at this study's settings, on its "
    "grid.\n\n![generated examples](examples.png)"
)


def draw_square(grid, path) -> None:
    """A 4x4 grey PNG, noting the grid it was asked to draw on in ``drawn_on``."""
    drawn_on.append(grid)
    Image.new("L", (4, 4), 128).save(path, format="png")


drawn_on: list = []


@pytest.fixture
def drawing_registry():
    track = dataclasses.replace(fake_track.TRACK, name="drawn", draw_examples=draw_square)
    plugin = types.SimpleNamespace(gridmix_tracks=hookimpl(lambda: [track]))
    yield load_registry(extra_plugins=[plugin], refresh=True)
    load_registry(refresh=True)


def test_a_study_draws_the_tracks_examples_beside_its_report_and_links_them(
    tmp_path, drawing_registry
):
    drawn_on.clear()
    out = tmp_path / "study"
    gridmix.run(
        "drawn",
        out=out,
        budget="smoke",
        models="fake-attention",
        lrs=(1e-3,),
        threads=1,
        scaling=False,
    )
    assert [str(grid) for grid in drawn_on] == ["8"]  # once, on the study's grid
    with Image.open(out / "examples.png") as picture:
        assert picture.size == (4, 4)
    markdown = (out / "report.md").read_text()
    assert LINK in markdown
    assert markdown.index(LINK) < markdown.index("## Plots")
    assert "![examples.png]" not in markdown  # not listed again among the plots
    # re-rendered from the ledger alone (no track at hand): the picture drawn is still shown
    assert CliRunner().invoke(app, ["report", str(out)]).exit_code == 0
    assert LINK in (out / "report.md").read_text() and len(drawn_on) == 1

    # a drawing that raises: the report is whole, the error one line of it, no picture
    def broken(path):
        raise RuntimeError("no pen")

    again = tmp_path / "broken"
    with Ledger(out, create=False) as ledger:
        report = build_report(ledger)
    paths = write_report(report, again, draw_examples=broken)
    assert [path.name for path in paths[:2]] == ["bench_report.json", "report.md"]
    assert not (again / "examples.png").exists() and not list(again.glob(".examples*"))
    error = "examples picture: RuntimeError: no pen"
    assert json.loads((again / "bench_report.json").read_text())["plot_errors"] == [error]
    markdown = (again / "report.md").read_text()
    assert f"- ⚠ {error}" in markdown and "## Generated examples" not in markdown
    assert "## Method" in markdown and "## Plots" in markdown


def test_a_drawing_that_writes_nothing_is_an_error_and_a_stale_picture_goes(tmp_path):
    with Ledger(tmp_path / "study") as ledger:
        ledger.set_study(study_spec())
        report = build_report(ledger)
    out = tmp_path / "report"
    out.mkdir()
    (out / "examples.png").write_bytes(b"an older picture")
    write_report(report, out, draw_examples=lambda path: None)
    assert not (out / "examples.png").exists()
    assert json.loads((out / "bench_report.json").read_text())["plot_errors"] == [
        "examples picture: ValueError: it wrote no picture at examples.png; expected a PNG there"
    ]


def test_draw_examples_must_be_callable_or_none():
    with pytest.raises(ContractError, match=r"draw_examples is 'a picture'; expected None or a"):
        dataclasses.replace(fake_track.TRACK, draw_examples="a picture")


@pytest.mark.parametrize(
    ("module", "grid"),
    [(recall, "4x4"), (pathfinder, "16x16"), (copy_track, "8x8"), (occlusion, "4x6x6")],
    ids=["recall", "pathfinder", "copy", "occlusion"],
)
def test_each_graded_track_draws_its_examples(tmp_path, module, grid):
    track = module.make_track()
    path = tmp_path / "examples.png"
    track.draw_examples(track.check_grid(grid), path)
    with Image.open(path) as picture:
        assert picture.format == "PNG" and min(picture.size) > 100
