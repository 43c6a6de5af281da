"""docs/plugins.md works from the page: its plugin file and ``pyproject.toml`` are extracted from
the Markdown, installed as a plugin through the real entry-point path (a ``*.dist-info`` folder on
``sys.path``, named and pointed as the ``pyproject.toml`` says), and the track runs end to end at
the smoke budget with its four arms, its baseline for gridmix's ``image`` track and its token
mixer."""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from gridmix import orchestrate
from gridmix.analysis.parity import parity_report
from gridmix.cli import app
from gridmix.tracks.plugin_loader import ALLOW_ENV, DISABLE_AUTOLOAD_ENV, load_registry

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def block(name: str) -> str:
    """The fenced block right after ``<!-- file: NAME -->`` in the guide."""
    found = re.search(
        rf"<!-- file: {re.escape(name)} -->\n```\w*\n(.*?)\n```", GUIDE.read_text(), re.S
    )
    assert found, f"docs/plugins.md has no block marked <!-- file: {name} -->"
    return found.group(1) + "\n"


def pyproject_fields(text: str) -> tuple[str, str, dict[str, str]]:
    """Name, version and the ``gridmix`` entry points of the guide's pyproject.toml (read by hand:
    Python 3.10 has no tomllib)."""
    name = re.search(r'^name = "([^"]+)"', text, re.M).group(1)
    version = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    section = re.search(
        r"^\[project\.entry-points\.gridmix\]\n(.*?)(?:\n\[|\Z)", text, re.M | re.S
    ).group(1)
    points = dict(re.findall(r'^([\w.-]+) = "([^"]+)"', section, re.M))
    return name, version, points


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The guide's plugin, 'installed' as the guide's pyproject.toml declares it."""
    source = tmp_path / "plugin"
    source.mkdir()
    (source / "halves_track.py").write_text(block("halves_track.py"))
    name, version, points = pyproject_fields(block("pyproject.toml"))
    info = source / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        "[gridmix]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
    )
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    monkeypatch.syspath_prepend(str(source))
    yield source, load_registry(refresh=True)
    monkeypatch.undo()
    sys.modules.pop("halves_track", None)
    load_registry(refresh=True)


def test_the_guides_file_is_clean_python():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--line-length",
            "120",
            "--stdin-filename",
            "halves_track.py",
            "-",
        ],
        input=block("halves_track.py"),
        capture_output=True,
        text=True,
        check=False,
    )
    # ruff is a dev dependency; the venv the tests use has it
    if "No module named ruff" in done.stderr:
        pytest.fail("ruff is not installed: pip install -e '.[dev]'")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_guides_plugin_loads_with_its_track_baseline_and_mixer(installed):
    _, registry = installed
    assert not registry.broken, registry.broken
    halves = registry.track("halves")
    assert (halves.plugin, halves.plugin_version) == ("halves", "0.1.0")
    assert [(m.name, m.role) for m in halves.models] == [
        ("vit", "baseline"),
        ("vit-concentration", "idea"),
        ("vit-concentration-uncapped", "ablation"),
        ("vit-tokenwise", "control"),
    ]
    assert (halves.chance, halves.ceiling) == (0.5, 1.0) and halves.backbone is not None
    image = registry.track("image")
    assert image.model("vit-wide").plugin == "halves"
    assert "grid-mean" in [mixer.name for mixer in registry.mixers]
    planned = orchestrate.plan_study("halves", budget="smoke", idea="grid-mean")
    assert planned.study.idea == "vit-grid-mean" and "vit" in planned.study.models
    model = planned.track.model("vit-grid-mean").build(halves.default_grid)
    assert model(torch.randn(3, 1, *halves.default_grid)).shape == (3, 2)
    # the guide's track is fair to its matched baseline
    parity = parity_report(halves, halves.default_grid)
    assert parity["warnings"] == [] and parity["matched_baseline"] == "vit"


def test_the_guides_track_runs_at_the_smoke_budget(installed, tmp_path):
    out = tmp_path / "halves"
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--track",
            "halves",
            "--budget",
            "smoke",
            "--threads",
            "1",
            "--no-scaling",
            "--out",
            str(out),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "bench_report.json").read_text())
    assert report["track"] == "halves" and report["model"] == "vit-concentration"
    assert set(report["baselines"]) == {"vit", "vit-concentration-uncapped", "vit-tokenwise"}
    assert report["failures"] == [] and report["budget"]["name"] == "smoke"
    assert all(arm["full"]["n"] == 2 for arm in (report["idea"], *report["baselines"].values()))
    assert report["chance"] == 0.5 and {arm["role"] for arm in report["baselines"].values()} == {
        "baseline",
        "ablation",
        "control",
    }


def written(value) -> str:
    """A budget field as the guide's table writes it."""
    if value is None or isinstance(value, bool):
        return {None: "–", True: "yes", False: "no"}[value]
    if isinstance(value, tuple):
        return ", ".join(f"{v:.0e}".replace("e-0", "e-") for v in value)
    return f"{value:g}"


def test_the_guides_budget_table_is_the_budgets():
    from gridmix.tracks.budget import BUDGETS

    section = GUIDE.read_text().split("### The budget")[1].split("###")[0]
    rows = re.findall(r"^\| (`[a-z_`, ]+`) \|[^|]*\| (.*) \|$", section, re.M)
    seen = set()
    for names, cells in rows:
        fields = re.findall(r"`([a-z_]+)`", names)
        for budget, cell in zip(("smoke", "default", "full"), cells.split(" | ")):
            expected = ", ".join(written(getattr(BUDGETS[budget], field)) for field in fields)
            assert cell.strip() == expected, (fields, budget)
        seen.update(fields)
    assert seen == {f.name for f in dataclasses.fields(BUDGETS["smoke"])} - {"name"}
