"""A real `gridmix run` subprocess killed with SIGKILL mid-sweep, then re-run, ends with exactly the
report of an uninterrupted run (timings aside: they are wall-clock measurements)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from gridmix.report.build import TIMING_KEYS


def command(out):
    return [
        sys.executable,
        "-m",
        "gridmix",
        "run",
        "--track",
        "sequence",
        "--budget",
        "smoke",
        "--seeds",
        "3",
        "--no-scaling",
        "--threads",
        "1",
        "--out",
        str(out),
    ]


def finished_rows(ledger) -> int:
    try:
        with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if entry.isdigit() and int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def comparable(out) -> dict:
    report = json.loads((out / "bench_report.json").read_text())
    return {key: value for key, value in report.items() if key not in TIMING_KEYS}


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    killed = tmp_path / "killed"
    proc = subprocess.Popen(command(killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while finished_rows(killed / "ledger.sqlite") < 2:
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    workers = children(proc.pid)
    assert workers  # two spawned workers (and multiprocessing's resource tracker)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 1.5
    # the orphaned workers end with their driver, memory and all
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, [pid for pid in workers if alive(pid)]
        time.sleep(0.2)
    before = finished_rows(killed / "ledger.sqlite")
    assert not (killed / "bench_report.json").exists()  # it really died mid-sweep

    resumed = subprocess.run(command(killed), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    after = finished_rows(killed / "ledger.sqlite")
    assert after > before

    clean = tmp_path / "clean"
    uninterrupted = subprocess.run(command(clean), capture_output=True, text=True)
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    assert finished_rows(clean / "ledger.sqlite") == after
    assert comparable(killed) == comparable(clean)
