"""``benchmarks/graded_table.py`` reads a plain ``gridmix run``'s directory as well as a
sweep's: the same arms, means and paired comparison as the run's own report."""

import importlib.util
import json
from pathlib import Path

from tests.fake_track import smoke_study

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "graded_table.py"


def _graded_table():
    spec = importlib.util.spec_from_file_location("graded_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_runs_directory_gives_one_rung_with_the_reports_numbers(tmp_path):
    with smoke_study(tmp_path):
        graded_table = _graded_table()
        markdown = graded_table.table(graded_table.run_document(tmp_path))
    report = json.loads((tmp_path / "bench_report.json").read_text())
    rows = {line.split(" | ")[1]: line for line in markdown.splitlines()[2:]}
    assert set(rows) == {report["primary_baseline"], report["idea"]["name"], *report["baselines"]}
    assert all(line.startswith("| fake |") for line in rows.values())  # no ladder: the track
    idea = report["idea"]
    seeds = idea["per_seed"]
    cells = rows[idea["name"]].split(" | ")
    assert cells[2] == f"{idea['mean']:.3f} ({min(seeds):.3f}–{max(seeds):.3f})"
    assert cells[3] == f"{report['comparison']['delta_mean']:+.3f}"
    assert cells[4] == f"{report['comparison']['p_value']:.3f}"
