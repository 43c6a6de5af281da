"""SIGINT and SIGTERM sent to the pid of a real `gridmix run` driver alone (not its process group)
stop it within seconds: its worker processes ended, one line saying how to resume, exit status 128 +
the signal; the same command then resumes, never retraining a finished run."""

import os
import signal
import sqlite3
import subprocess
import time

from tests.test_resume_sigkill import alive, children, command, finished_rows

STOP_S = 10.0  # the longest a signalled driver may take to end


def ledger_rows(out) -> dict[str, float]:
    """Every finished run's key and its recorded wall-clock seconds (a retrained run would record
    new ones)."""
    with sqlite3.connect(f"file:{out / 'ledger.sqlite'}?mode=ro", uri=True, timeout=5) as conn:
        return dict(conn.execute("SELECT key, wall_s FROM runs").fetchall())


def default_signals() -> None:
    """The driver's stop signals at their default disposition: a test started in the background of
    a shell without job control (``cmd &``, nohup) inherits SIGINT ignored, which gridmix keeps."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def interrupt(out, signum: int, *, after_rows: int) -> str:
    """Start the study, send ``signum`` to its driver once the ledger holds ``after_rows`` runs,
    check that the driver and its workers are gone within :data:`STOP_S` with the resume line and
    status 128 + ``signum``; its stderr."""
    proc = subprocess.Popen(
        command(out),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    try:
        deadline = time.monotonic() + 300
        while finished_rows(out / "ledger.sqlite") < after_rows:
            assert proc.poll() is None, "the run ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        workers = children(proc.pid)
        assert workers  # two spawned workers (and multiprocessing's resource tracker)
        os.kill(proc.pid, signum)
        sent = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
        stopped_s = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert stopped_s < STOP_S, (
        f"{signal.Signals(signum).name}: the driver took {stopped_s:.1f} s to stop"
    )
    assert proc.returncode == 128 + signum, stderr
    line = (
        f"interrupted by {signal.Signals(signum).name}: the finished runs are saved in "
        f"{out / 'ledger.sqlite'}"
    )
    assert line in stderr and "re-run the same command to resume" in stderr
    assert "leaked semaphore" not in stderr and "Traceback" not in stderr, stderr
    deadline = time.monotonic() + 1
    while any(alive(pid) for pid in workers):  # the driver ended them before it exited
        assert time.monotonic() < deadline, [pid for pid in workers if alive(pid)]
        time.sleep(0.05)
    return stderr


def test_sigint_and_sigterm_to_the_driver_stop_it_and_the_same_command_resumes(tmp_path):
    out = tmp_path / "study"
    interrupt(out, signal.SIGINT, after_rows=2)
    first = ledger_rows(out)
    # the re-run resumed, then was stopped again
    interrupt(out, signal.SIGTERM, after_rows=len(first) + 2)
    second = ledger_rows(out)
    assert {key: second[key] for key in first} == first  # the first part's runs were not retrained
    finished = subprocess.run(command(out), capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert (
        f"{len(second)} of " in finished.stderr and "runs already in the ledger" in finished.stderr
    )
    final = ledger_rows(out)
    assert {key: final[key] for key in second} == second and len(final) > len(second)
    assert (out / "bench_report.json").exists()
