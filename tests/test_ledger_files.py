"""The file system as an adversary: unwritable or read-only output directories give one line naming
the path, a half-created ledger is recreated, a second live process on one ``--out`` is refused and
a SIGKILLed one leaves no stuck lock."""

import os
import sqlite3
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gridmix.cli import app
from gridmix.study.ledger import LEDGER_NAME, LOCK_NAME, Ledger, LedgerError
from gridmix.study.spec import Study
from gridmix.tracks.budget import BUDGETS

RUN = [
    "run",
    "--track",
    "sequence",
    "--models",
    "transformer",
    "--budget",
    "smoke",
    "--no-scaling",
    "--threads",
    "1",
]


def one_error_line(result, *fragments) -> None:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture
def seal():
    """``seal(path)`` makes a directory read-only: permissions, or a read-only bind mount when
    root."""
    sealed = []

    def make(path):
        if os.geteuid() != 0:
            for item in [path, *path.rglob("*")]:
                item.chmod(0o555 if item.is_dir() else 0o444)
            sealed.append(("chmod", path))
            return
        done = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip("running as root without mount: no way to make a directory read-only")
        sealed.append(("mount", path))
        subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)

    yield make
    for how, path in sealed:
        if how == "mount":
            subprocess.run(["umount", str(path)], check=True)
        else:
            for item in [path, *path.rglob("*")]:
                item.chmod(0o755)


def test_unwritable_out_is_one_line():
    result = CliRunner().invoke(app, [*RUN, "--out", "/proc/forbidden"])
    one_error_line(result, "/proc/forbidden")


def study_spec() -> dict:
    return Study(
        track="sequence",
        grid="64",
        models=("transformer-concentration", "transformer"),
        idea="transformer-concentration",
        matched_baseline="transformer",
        metric_name="test MSE",
        direction="lower",
        budget=BUDGETS["smoke"],
        device="cpu",
        threads=1,
    ).to_dict()


def test_read_only_out_is_one_line_for_run_resume_and_report(tmp_path, seal):
    empty = tmp_path / "empty"
    empty.mkdir()
    resumed = tmp_path / "resumed"
    with Ledger(resumed) as ledger:
        ledger.set_study(study_spec())
    seal(empty)
    seal(resumed)
    one_error_line(CliRunner().invoke(app, [*RUN, "--out", str(empty)]), str(empty))
    one_error_line(CliRunner().invoke(app, [*RUN, "--out", str(resumed)]), str(resumed))
    one_error_line(CliRunner().invoke(app, ["report", str(resumed)]), str(resumed))


def test_half_created_ledger_is_recreated(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # what a full disk left behind: the meta table, no marker
    conn = sqlite3.connect(out / LEDGER_NAME)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="half-created"):
        Ledger(out, create=False)
    with Ledger(out) as ledger:
        ledger.set_study(study_spec())
    with Ledger(out, create=False) as ledger:
        assert ledger.study()["track"] == "sequence"
    assert sorted(p.name for p in out.iterdir()) == [LEDGER_NAME]  # no temporary file left


def test_leftover_lock_and_temp_files_do_not_make_a_directory_foreign(tmp_path):
    (tmp_path / LOCK_NAME).write_text("12345\n")
    (tmp_path / f".{LEDGER_NAME}.999.tmp").write_bytes(b"partial")
    with Ledger(tmp_path, lock=True) as ledger:
        assert ledger.rows() == []


HOLDER = """
import sys, time
from gridmix.study.ledger import Ledger
ledger = Ledger(sys.argv[1], lock=True)
print("locked", flush=True)
time.sleep(120)
"""


def test_second_live_process_is_refused_and_a_killed_one_leaves_no_lock(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(
            LedgerError, match=f"in use by another gridmix process \\(pid {holder.pid}\\)"
        ):
            Ledger(out, lock=True)
        one_error_line(CliRunner().invoke(app, [*RUN, "--out", str(out)]), "in use", str(out))
        one_error_line(CliRunner().invoke(app, ["report", str(out)]), "in use")
    finally:
        holder.kill()  # SIGKILL: no clean-up runs in the holder
        holder.wait()
    with Ledger(out, lock=True) as ledger:
        assert ledger.rows() == []


def test_sqlite_error_mid_run_is_one_line(tmp_path, monkeypatch):
    def full_disk(self, row):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Ledger, "record", full_disk)
    result = CliRunner().invoke(
        app,
        [
            *RUN,
            "--out",
            str(tmp_path / "out"),
            "--seeds",
            "2",
            "--lrs",
            "1e-3",
            "--models",
            "transformer",
        ],
    )
    lines = [line for line in result.output.strip().splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert lines == [f"error: {tmp_path / 'out'}: SQLite error: database or disk is full"]
