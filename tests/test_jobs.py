"""Worker processes change nothing but the wall time: at one thread per run, a study run by one
worker (in the driver's process) and by two spawned workers gives the same per-seed numbers, bit for
bit. The workers start once per study, not once per phase, and are gone when it ends. A script that
calls the front door unguarded is refused (its workers import it first), not run once per worker."""

import json
import multiprocessing
import subprocess
import sys

import pytest

from gridmix import orchestrate
from gridmix.orchestrate import Callbacks
from gridmix.study.executors import MAIN_RERUN
from gridmix.tracks.plugin_loader import load_registry
from tests.installed import install


@pytest.fixture
def fake_installed(tmp_path, monkeypatch):
    """The fake track as an installed plugin (a dist-info folder on sys.path), so spawned workers
    load it too, with the built-in mixers its models are built from."""
    yield install(
        monkeypatch,
        tmp_path,
        {"gridmix-fake-track": {"fake": "tests.fake_track"}},
        allow="fake,builtin-mixers",
    )
    monkeypatch.undo()
    load_registry(refresh=True)


def per_seed(out) -> dict:
    report = json.loads((out / "bench_report.json").read_text())
    arms = [report["idea"], *report["baselines"].values()]
    return {
        arm["name"]: (arm["best_cfg"]["lr"], arm["full"]["per_seed"], arm["curves"]) for arm in arms
    }


def test_one_worker_and_two_give_the_same_numbers_at_one_thread_per_run(fake_installed, tmp_path):
    options = dict(budget="smoke", seeds=3, threads=1, scaling=False)
    orchestrate.run("fake", out=tmp_path / "one", jobs=1, **options)
    orchestrate.run("fake", out=tmp_path / "two", jobs=2, **options)
    one, two = per_seed(tmp_path / "one"), per_seed(tmp_path / "two")
    assert one == two and len(one) == 3
    # the idea finished every seed: there are numbers to compare
    assert len(one["fake-mixer"][1]) == 3


def test_a_study_keeps_one_set_of_workers_from_its_sweep_to_its_comparison(
    fake_installed, tmp_path
):
    workers, phases = set(), []

    def done(task, row):
        workers.update(child.pid for child in multiprocessing.active_children())
        phases.append(task.sweep)

    orchestrate.run(
        "fake",
        out=tmp_path / "out",
        jobs=2,
        budget="smoke",
        seeds=3,
        threads=1,
        scaling=False,
        callbacks=Callbacks(done=done),
    )
    assert True in phases and False in phases  # both phases ran in workers
    assert len(workers) == 2  # a pool per phase would have started four
    assert multiprocessing.active_children() == []  # the study ended its workers


UNGUARDED = """import gridmix

report = gridmix.run(track="image", grid="8x8", budget="smoke", out="runs", scaling=False, jobs=2,
                     models="vit,vit-tokenwise", lrs=(1e-3,))
print("verdict:", report.verdict)
"""


def test_a_script_without_a_main_guard_is_refused_in_one_line_and_exits_non_zero(tmp_path):
    """Each spawned worker imports the script first; unguarded, the call in it would start the study
    again."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode != 0 and "verdict:" not in done.stdout
    lines = done.stderr.splitlines()
    assert lines[-1] == f"RuntimeError: {MAIN_RERUN}"  # the driver's error, raised to the script
    assert f"gridmix: {MAIN_RERUN}" in lines  # each worker's one line, instead of a second study
