"""The ledger keeps finished runs, refuses foreign files, and holds one study per directory."""

import sqlite3

import pytest

from gridmix.study.ledger import LEDGER_NAME, Ledger, LedgerError, RunRow, run_key


def row(seed=0, status="ok", test=0.5):
    key = run_key(track="t", model="m", grid="4x4", lr=1e-3, seed=seed, config={"epochs": 2})
    return RunRow(
        key=key,
        track="t",
        model="m",
        grid="4x4",
        lr=1e-3,
        seed=seed,
        config={"epochs": 2},
        status=status,
        val_metric=0.4,
        test_metric=test,
        train_loss=[1.0, 0.5],
        val_curve=[0.5, 0.4],
        epochs_done=2,
        wall_s=1.5,
        threads=2,
        device="cpu",
        versions={"torch": "x"},
        error="",
        extras={"mechanism": {"confirmed": True}},
    )


def test_round_trip_and_reopen(tmp_path):
    with Ledger(tmp_path / "out") as ledger:
        ledger.record(row(0))
        ledger.record(row(1, test=0.7))
        ledger.set_study({"track": "t", "grid": "4x4", "seeds": 2})
    with Ledger(tmp_path / "out", create=False) as ledger:
        rows = ledger.rows()
        assert [r.seed for r in rows] == [0, 1] and rows[1].test_metric == 0.7
        assert rows[0] == row(0)
        assert ledger.get(row(1).key).extras == {"mechanism": {"confirmed": True}}
        assert ledger.get("missing") is None
        assert ledger.study() == {"track": "t", "grid": "4x4", "seeds": 2}


def test_key_depends_on_everything_that_shapes_a_run():
    base = dict(track="t", model="m", grid="4x4", lr=1e-3, seed=0, config={"epochs": 2})
    keys = {run_key(**base)}
    for change in [
        dict(track="u"),
        dict(model="n"),
        dict(grid="4x5"),
        dict(lr=3e-3),
        dict(seed=1),
        dict(config={"epochs": 3}),
    ]:
        keys.add(run_key(**{**base, **change}))
    assert len(keys) == 7
    assert run_key(**base) == run_key(**dict(base))


def test_refuses_foreign_and_corrupt_paths(tmp_path):
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("hello")
    with pytest.raises(LedgerError, match="is a file"):
        Ledger(not_a_dir)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(LedgerError, match="not empty"):
        Ledger(busy)
    assert (busy / "notes.txt").read_text() == "mine" and not (busy / LEDGER_NAME).exists()
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / LEDGER_NAME).write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(LedgerError, match="not a gridmix ledger"):
        Ledger(corrupt)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    sqlite3.connect(foreign / LEDGER_NAME).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(LedgerError, match="not a gridmix ledger"):
        Ledger(foreign)
    with pytest.raises(LedgerError, match="holds no gridmix ledger"):
        Ledger(tmp_path / "absent", create=False)


def test_one_study_per_directory(tmp_path):
    with Ledger(tmp_path) as ledger:
        ledger.set_study({"track": "image", "grid": "8x8", "seeds": 2})
        ledger.set_study({"track": "image", "grid": "8x8", "seeds": 4})  # same study, extended
        assert ledger.study()["seeds"] == 4
        with pytest.raises(LedgerError, match="choose another --out"):
            ledger.set_study({"track": "image", "grid": "16x16", "seeds": 2})


def test_rows_are_built_from_a_task_and_its_result_or_its_failure(tmp_path):
    from gridmix.study.spec import RunTask
    from gridmix.study.train import RunResult
    from gridmix.tracks.budget import BUDGETS

    task = RunTask(
        track="t",
        model="m",
        grid="4x4",
        lr=1e-3,
        seed=3,
        budget=BUDGETS["smoke"],
        device="cpu",
        threads=2,
    )
    result = RunResult(
        "ok",
        val_metric=0.4,
        test_metric=0.5,
        train_loss=[1.0],
        val_curve=[0.4],
        epochs_done=1,
        wall_s=2.0,
        extras={"mechanism": {}},
    )
    done = task.row(result, threads=1, versions={"torch": "x"})
    assert (done.key, done.seed, done.config, done.device) == (task.key, 3, task.config, "cpu")
    assert (done.status, done.test_metric, done.val_curve, done.threads, done.error) == (
        "ok",
        0.5,
        [0.4],
        1,
        "",
    )
    failed = task.failed_row("worker died", versions={"torch": "x"})
    assert (failed.status, failed.error, failed.threads, failed.test_metric, failed.train_loss) == (
        "failed",
        "worker died",
        2,
        None,
        [],
    )
    assert task.failed_row("bad data", versions={}, threads=1).threads == 1
    with Ledger(tmp_path / "out") as ledger:
        ledger.record(failed)
        assert ledger.get(task.key) == failed
