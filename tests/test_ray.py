"""`gridmix run --executor ray` against a real Ray head started on 127.0.0.1 (and stopped again)
gives the same ledger and report as a local run of the same command."""

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    port = free_port()
    temp = tmp_path_factory.mktemp("ray")
    started = subprocess.run(
        [
            RAY,
            "start",
            "--head",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(port),
            "--num-cpus",
            "2",
            "--num-gpus",
            "0",
            "--include-dashboard",
            "false",
            "--disable-usage-stats",
            "--temp-dir",
            str(temp),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)


def gridmix(*arguments):
    """``python -m gridmix ARGUMENTS`` in a subprocess, which must exit 0."""
    cmd = [sys.executable, "-m", "gridmix", *arguments]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def run(out, *extra):
    start = time.perf_counter()
    gridmix(
        "run",
        "--track",
        "sequence",
        "--budget",
        "smoke",
        "--no-scaling",
        "--threads",
        "1",
        "--out",
        str(out),
        *extra,
    )
    return time.perf_counter() - start


def ledger_metrics(out):
    with sqlite3.connect(out / "ledger.sqlite") as conn:
        return conn.execute(
            "SELECT key, model, lr, seed, status, val_metric, test_metric, train_loss, threads "
            "FROM runs ORDER BY key"
        ).fetchall()


def test_ray_run_equals_local_run(tmp_path, ray_head):
    local_s = run(tmp_path / "local")
    ray_s = run(tmp_path / "ray", "--executor", "ray", "--address", ray_head)
    print(f"local {local_s:.1f} s, ray {ray_s:.1f} s")
    assert ledger_metrics(tmp_path / "ray") == ledger_metrics(tmp_path / "local")
    reports = [
        json.loads((tmp_path / name / "bench_report.json").read_text()) for name in ("local", "ray")
    ]
    for report in reports:
        report.pop("timings")
    assert reports[0] == reports[1]


def suite(out, *extra):
    gridmix(
        "suite",
        "--tracks",
        "recall",
        "--rungs",
        "recall=pairs-1",
        "--budget",
        "smoke",
        "--threads",
        "1",
        "--out",
        str(out),
        *extra,
    )


def test_ray_suite_equals_local_suite(tmp_path, ray_head):
    suite(tmp_path / "local")
    suite(tmp_path / "ray", "--executor", "ray", "--address", ray_head)
    assert ledger_metrics(tmp_path / "ray" / "recall") == ledger_metrics(
        tmp_path / "local" / "recall"
    )
    profiles = [
        json.loads((tmp_path / name / "suite.json").read_text()) for name in ("local", "ray")
    ]
    for profile in profiles:
        for track in profile["tracks"]:
            del track["seconds"]  # wall-clock, measured
    assert profiles[0] == profiles[1]
