"""``gridmix tracks``: the rich tables and ``--json``, through Typer's runner and as a real
subprocess."""

import json
import os
import subprocess
import sys
import types

import pytest
from typer.testing import CliRunner

from gridmix.cli import app
from gridmix.cli.tracks import registry_summary
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import ALLOW_ENV, DISABLE_AUTOLOAD_ENV, load_registry


@pytest.fixture
def fresh_registry(monkeypatch):
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    load_registry(refresh=True)
    yield
    monkeypatch.undo()
    load_registry(refresh=True)


def test_tracks_table_lists_builtin_tracks_models_and_plugins(fresh_registry):
    result = CliRunner().invoke(app, ["tracks"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in (
        "sequence",
        "image",
        "video",
        "1-d",
        "2-d",
        "3-d",
        "32x32",
        "8x8x8",
        "test MSE ↓",
        "accuracy ↑",
        "vit-concentration (idea)",
        "vit (matched)",
        "mlp-mixer",
        "divided-attention",
        "transformer-concentration (idea)",
        "image 0.1.0",
        "same tint as the background",
    ):
        assert text in result.output, text
    assert "broken plugins" not in result.output


def test_tracks_json_is_machine_readable(fresh_registry):
    result = CliRunner().invoke(app, ["tracks", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    tracks = {track["name"]: track for track in summary["tracks"]}
    assert {"sequence", "image", "video"} <= set(tracks)
    image = tracks["image"]
    assert (image["ndim"], image["default_grid"], image["metric"], image["direction"]) == (
        2,
        "32x32",
        "test cross-entropy",
        "lower",
    )
    assert image["plugin"] == "image" and image["plugin_version"]
    roles = {model["name"]: (model["role"], model["matched_baseline"]) for model in image["models"]}
    assert roles == {
        "vit": ("baseline", True),
        "vit-concentration": ("idea", False),
        "mlp-mixer": ("baseline", False),
        "vit-concentration-uncapped": ("ablation", False),
        "vit-tokenwise": ("control", False),
    }
    assert summary["broken"] == []


def test_broken_plugins_get_their_own_table(fresh_registry):
    def explode():
        raise ImportError("needs a GPU driver")

    broken = types.SimpleNamespace(__name__="fragile", gridmix_tracks=hookimpl(explode))
    load_registry(refresh=True, extra_plugins=[broken])
    result = CliRunner().invoke(app, ["tracks"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "broken plugins" in result.output and "fragile" in result.output
    assert "ImportError: needs a GPU driver" in result.output and "image" in result.output
    summary = json.loads(CliRunner().invoke(app, ["tracks", "--json"]).output)
    assert summary["broken"] == [
        {"name": "fragile", "version": "", "error": "ImportError: needs a GPU driver"}
    ]


def test_tracks_json_as_a_subprocess():
    env = {k: v for k, v in os.environ.items() if k not in (DISABLE_AUTOLOAD_ENV, ALLOW_ENV)}
    done = subprocess.run(
        [sys.executable, "-m", "gridmix", "tracks", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert {"sequence", "image", "video"} <= {
        track["name"] for track in json.loads(done.stdout)["tracks"]
    }
    only = subprocess.run(
        [sys.executable, "-m", "gridmix", "tracks", "--json"],
        capture_output=True,
        text=True,
        env={**env, ALLOW_ENV: "video"},
        timeout=120,
        check=False,
    )
    assert [track["name"] for track in json.loads(only.stdout)["tracks"]] == ["video"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "--budget", "huge"],
            "'--budget': 'huge' is not a budget; expected smoke, default or full",
        ),
        (
            ["run", "--device", "tpu"],
            "'--device': 'tpu' is not a device; did you mean 'cpu'? expected auto, cpu or cuda",
        ),
        (
            ["scale", "--track", "image", "--device", "gpu"],
            "'gpu' is not a device; did you mean 'cpu'? expected auto, cpu or cuda",
        ),
        (
            ["run", "--executor", "dask"],
            "'--executor': 'dask' is not an executor; expected local or ray",
        ),
        (["run", "--seeds", "1"], "'--seeds': Input should be greater than or equal to 2"),
    ],
)
def test_typer_refuses_a_bad_option_value_in_one_line(args, message):
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert (
        result.output.startswith("error: Invalid value for ") and result.output.count("\n") == 1
    ), result.output
    assert message in result.output


def test_data_column_says_which_tracks_need_data_and_whether_it_was_found(
    fresh_registry, monkeypatch, tmp_path
):
    for name in ("GRIDMIX_IMAGE_FOLDER", "GRIDMIX_SEQUENCE_CSV", "GRIDMIX_DATA_ROOT"):
        monkeypatch.delenv(name, raising=False)
    load_registry(refresh=True)
    tracks = {
        t["name"]: t
        for t in json.loads(CliRunner().invoke(app, ["tracks", "--json"]).output)["tracks"]
    }
    assert tracks["image"]["data"] == "generated" and tracks["image"]["data_missing"] is None
    assert (
        tracks["sequence-csv"]["data"] == "missing"
        and "needs --data FILE" in tracks["sequence-csv"]["data_missing"]
    )
    assert (
        tracks["image-folder"]["data"] == "missing"
        and "needs --data DIR" in tracks["image-folder"]["data_missing"]
    )
    assert tracks["mnist"]["data"] == "missing" and "--data-root" in tracks["mnist"]["data_missing"]
    table = CliRunner().invoke(app, ["tracks"], env={"COLUMNS": "250"}).output
    assert table.splitlines()[1].split() == [
        "track",
        "grid",
        "metric",
        "models",
        "data",
        "plugin",
    ]  # piped: plain
    assert "generated" in table and "missing" in table
    refused = CliRunner().invoke(
        app, ["run", "--track", "image-folder", "--out", str(tmp_path / "out")]
    )
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1, refused.output
    assert "needs --data DIR" in refused.output

    series = tmp_path / "load.csv"
    series.write_text("value\n" + "".join(f"{i % 9}\n" for i in range(200)))
    monkeypatch.setenv("GRIDMIX_SEQUENCE_CSV", str(series))
    load_registry(refresh=True)
    found = {t["name"]: t for t in registry_summary(load_registry())["tracks"]}["sequence-csv"]
    assert (found["data"], found["data_missing"]) == ("found", None)
    assert str(series) in CliRunner().invoke(app, ["tracks"], env={"COLUMNS": "400"}).output
