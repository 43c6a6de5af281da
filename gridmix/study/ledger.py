"""The run ledger: an embedded SQLite file in the output directory, one row per finished run.

Every run (track, model, grid, config, learning rate, seed) is written in one transaction when it
ends, keyed by a hash of everything that determines its numbers. A re-run of the same command skips
the rows already there, so a sweep killed at any point (SIGKILL included: SQLite's journal makes the
write atomic) resumes and loses nothing. The study's specification is kept too, so ``gridmix report
DIR`` re-renders from the ledger alone. docs/design.md section 6.

A path that holds something else (a file that is not SQLite, a database without gridmix's marker, a
non-empty directory without a ledger) is refused with a clear error; nothing is ever overwritten.
The ledger is built in a temporary file and linked into place, so it is never seen half-created; one
left half-created by an older gridmix (a ``meta`` table and no runs, e.g. on a full disk) is
recreated. The study's identity includes its data fingerprint (:mod:`gridmix.study.fingerprint`):
results on other data are refused, not reused.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

LEDGER_NAME = "ledger.sqlite"
LOCK_NAME = ".gridmix.lock"
FORMAT = "gridmix-ledger"
VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY,
    track TEXT NOT NULL, model TEXT NOT NULL, grid TEXT NOT NULL,
    lr REAL NOT NULL, seed INTEGER NOT NULL,
    config TEXT NOT NULL,           -- JSON: budget fields and model_kwargs that shape the run
    status TEXT NOT NULL,           -- ok | diverged | failed
    val_metric REAL, test_metric REAL,
    train_loss TEXT NOT NULL, val_curve TEXT NOT NULL,   -- JSON lists, one entry per epoch
    epochs_done INTEGER NOT NULL, wall_s REAL NOT NULL, threads INTEGER NOT NULL,
    device TEXT NOT NULL, versions TEXT NOT NULL, error TEXT NOT NULL,
    extras TEXT NOT NULL            -- JSON: per-run analysis (e.g. the mechanism signature)
);
"""


class LedgerError(ValueError):
    """The output path holds something that is not a gridmix ledger."""


@dataclass(frozen=True)
class RunRow:
    """One finished run as the ledger stores it; a task builds its own (``RunTask.row``,
    ``RunTask.failed_row``)."""

    key: str
    track: str
    model: str
    grid: str
    lr: float
    seed: int
    config: dict
    status: str
    val_metric: float | None
    test_metric: float | None
    train_loss: list
    val_curve: list
    epochs_done: int
    wall_s: float
    threads: int
    device: str
    versions: dict
    error: str
    extras: dict


_JSON_FIELDS = ("config", "train_loss", "val_curve", "versions", "extras")


def run_key(*, track: str, model: str, grid: str, lr: float, seed: int, config: dict) -> str:
    """Stable identity of a run: the same inputs always give the same key."""
    identity = json.dumps(
        dict(track=track, model=model, grid=grid, lr=repr(float(lr)), seed=seed, config=config),
        sort_keys=True,
    )
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


class Ledger:
    """Open (or create) the ledger of the output directory ``out``.

    ``lock=True`` takes an exclusive lock on ``out`` (an ``flock`` on :data:`LOCK_NAME`, released by
    the kernel when the process dies, even by SIGKILL) and refuses a directory a live process holds.
    """

    def __init__(self, out: str | Path, *, create: bool = True, lock: bool = False) -> None:
        out = Path(out)
        self.path = out / LEDGER_NAME
        self._lock = None
        if out.exists() and not out.is_dir():
            raise LedgerError(
                f"output path {str(out)!r} is a file, not a directory; choose another --out"
            )
        if not self.path.exists():
            if not create:
                raise LedgerError(
                    f"{str(out)!r} holds no gridmix ledger ({LEDGER_NAME}); is it a gridmix "
                    "output dir?"
                )
            if out.exists() and any(not _own_file(path.name) for path in out.iterdir()):
                raise LedgerError(
                    f"output directory {str(out)!r} is not empty and holds no gridmix ledger; "
                    "refusing to write into it, choose another --out"
                )
            out.mkdir(parents=True, exist_ok=True)
        if lock:
            self._lock = _acquire_lock(out)
        try:
            self._conn = self._open(create)
        except BaseException:
            self._release()
            raise

    def _open(self, create: bool) -> sqlite3.Connection:
        if not self.path.exists():
            _create_atomically(self.path)
        conn = sqlite3.connect(self.path)
        try:
            tables = {
                row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            marker = (
                dict(conn.execute("SELECT key, value FROM meta").fetchall())
                if "meta" in tables
                else {}
            )
            half_created = (
                tables <= {"meta", "runs"}
                and not marker
                and (
                    "runs" not in tables
                    or conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
                )
            )
        except sqlite3.DatabaseError as error:
            conn.close()
            raise LedgerError(
                f"{str(self.path)!r} is not a gridmix ledger (SQLite says: {error})"
            ) from None
        # an earlier gridmix died (or ran out of space) while creating it: nothing to lose
        if half_created:
            conn.close()
            if not create:
                raise LedgerError(
                    f"{str(self.path)!r} is a half-created gridmix ledger holding no runs; "
                    "`gridmix run` recreates it"
                )
            self.path.unlink()
            _create_atomically(self.path)
            return sqlite3.connect(self.path)
        if marker.get("format") != FORMAT or "runs" not in tables:
            conn.close()
            raise LedgerError(
                f"{str(self.path)!r} is an SQLite file but not a gridmix ledger; refusing to "
                "touch it"
            )
        if marker.get("version") != str(VERSION):
            conn.close()
            raise LedgerError(
                f"{str(self.path)!r} has ledger version {marker.get('version')}; "
                f"this gridmix reads version {VERSION}"
            )
        return conn

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the file drops the flock
            self._lock = None

    def close(self) -> None:
        self._conn.close()
        self._release()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ runs

    def get(self, key: str) -> RunRow | None:
        cursor = self._conn.execute("SELECT * FROM runs WHERE key = ?", (key,))
        row = cursor.fetchone()
        return None if row is None else self._row(cursor, row)

    def record(self, row: RunRow) -> None:
        """Write one finished run atomically (replacing an earlier row with the same key)."""
        values = asdict(row)
        for name in _JSON_FIELDS:
            values[name] = json.dumps(values[name], sort_keys=True)
        columns = ", ".join(values)
        with self._conn:
            self._conn.execute(
                f"INSERT OR REPLACE INTO runs ({columns}) VALUES ({', '.join('?' * len(values))})",
                tuple(values.values()),
            )

    def rows(self) -> list[RunRow]:
        cursor = self._conn.execute("SELECT * FROM runs ORDER BY track, model, grid, lr, seed")
        return [self._row(cursor, row) for row in cursor.fetchall()]

    @staticmethod
    def _row(cursor: sqlite3.Cursor, row: tuple) -> RunRow:
        values = {description[0]: value for description, value in zip(cursor.description, row)}
        for name in _JSON_FIELDS:
            values[name] = json.loads(values[name])
        return RunRow(**values)

    # ------------------------------------------------------------------ the study

    def fetch(self, name: str) -> dict | None:
        """A JSON document kept beside the runs (the study spec, measured analyses), or None."""
        found = self._conn.execute(
            "SELECT value FROM meta WHERE key = ?", (f"doc:{name}",)
        ).fetchone()
        return None if found is None else json.loads(found[0])

    def put(self, name: str, document: dict) -> None:
        with self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                (f"doc:{name}", json.dumps(document, sort_keys=True)),
            )

    def study(self) -> dict | None:
        return self.fetch("study")

    def set_study(self, study: dict) -> None:
        """Store the study spec; a directory holds one study (one track on one grid, with one set of
        the track's settings), beside at most one sweep of the same track (:meth:`set_sweep`), whose
        runs it may share."""
        previous = self.study()
        if previous is not None and _identity(previous) != _identity(study):
            raise LedgerError(
                f"{str(self.path.parent)!r} holds the study of {_describe(previous)}; it cannot "
                f"also hold {_describe(study)}: choose another --out"
            )
        sweep = self.sweep()
        if sweep is not None and sweep["track"] != study["track"]:
            raise LedgerError(
                f"{str(self.path.parent)!r} holds a sweep of track {sweep['track']!r}; it cannot "
                f"also hold a study of {study['track']!r}: choose another --out"
            )
        if previous is not None:
            _refuse_other_data(self.path.parent, previous, study)
        self.put("study", study)

    def sweep(self) -> dict | None:
        """The sweep's document (``gridmix sweep``): its track, the swept settings and every point's
        study spec."""
        return self.fetch("sweep")

    def set_sweep(self, sweep: dict) -> None:
        """Store the sweep's document: ``track``, ``over`` and ``points`` (each with its ``values``
        and its ``study`` spec). A directory holds one sweep of one track, beside a plain study of
        that track; a later sweep of the same track replaces the document (its points' runs are
        shared through their keys). A point whose study already stood here, on other data, is
        refused (``--fresh`` starts afresh)."""
        track = sweep["track"]
        study = self.study()
        if study is not None and study["track"] != track:
            raise LedgerError(
                f"{str(self.path.parent)!r} holds the study of {_describe(study)}; it cannot also "
                f"hold a sweep of {track!r}: choose another --out"
            )
        previous = self.sweep()
        if previous is not None and previous["track"] != track:
            raise LedgerError(
                f"{str(self.path.parent)!r} holds a sweep of track {previous['track']!r}; it "
                f"cannot also hold one of {track!r}: choose another --out"
            )
        earlier = [point["study"] for point in (previous or {}).get("points", [])] + (
            [study] if study else []
        )
        for point in sweep["points"]:
            for spec in earlier:
                if _identity(spec) == _identity(point["study"]):
                    _refuse_other_data(self.path.parent, spec, point["study"])
        self.put("sweep", sweep)

    def start_fresh(self) -> None:
        """Forget the study spec, the sweep and their analyses (the old runs stay, under keys no new
        study uses)."""
        with self._conn:
            self._conn.execute(
                "DELETE FROM meta WHERE key IN ('doc:study', 'doc:analyses', 'doc:sweep')"
            )


def _identity(study: dict) -> tuple:
    """What one directory's study is: its track, grid and the track's settings."""
    return study["track"], study["grid"], sorted((study.get("settings") or {}).items())


def _describe(study: dict) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in sorted((study.get("settings") or {}).items()))
    return f"track {study['track']!r} on grid {study['grid']}" + (
        f" with {settings}" if settings else ""
    )


def _refuse_other_data(where: Path, previous: dict, study: dict) -> None:
    """``LedgerError`` when ``study`` stands on other data than the same study stored before."""
    from gridmix.study.fingerprint import describe_change

    change = describe_change(previous.get("data") or {}, study.get("data") or {})
    if change and previous.get("data") and study.get("data"):
        raise LedgerError(
            f"{str(where)!r} holds results on other data ({change}); re-run with --fresh to start "
            "a fresh study there, or choose another --out"
        )


def lock_holder(out: str | Path) -> int | None:
    """The pid of the process holding ``out``'s lock (a study running there), or ``None`` when none
    holds it.

    It probes the lock with a shared, non-blocking ``flock`` released at once (a ``gridmix run``
    starting in that instant would be told the directory is in use; run it again). A lock file whose
    pid cannot be read gives -1.
    """
    path = Path(out) / LOCK_NAME
    if not path.exists():
        return None
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = handle.read().strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def find_ledgers(root: str | Path) -> list[Path]:
    """The output directories under ``root`` (``root`` itself included) that hold a ledger, sorted
    by path."""
    root = Path(root)
    return sorted({path.parent for path in root.rglob(LEDGER_NAME) if path.is_file()})


def _own_file(name: str) -> bool:
    """Files gridmix itself keeps in an output directory beside the ledger (lock, temp and journal
    files)."""
    return name == LOCK_NAME or name.lstrip(".").startswith(LEDGER_NAME)


def _create_atomically(path: Path) -> None:
    """Build a complete empty ledger in a temporary file, then link it into place (never half a
    ledger)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        conn = sqlite3.connect(temp)
        try:
            with conn:
                conn.executescript(_SCHEMA)
                conn.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [("format", FORMAT), ("version", str(VERSION))],
                )
        finally:
            conn.close()
        try:
            # atomic and never overwrites: a ledger another process made first wins
            os.link(temp, path)
        except FileExistsError:
            pass
    finally:
        temp.unlink(missing_ok=True)


def _acquire_lock(out: Path):
    """An exclusive, non-blocking flock on ``out/LOCK_NAME`` holding our pid; ``LedgerError`` if
    taken."""
    handle = open(out / LOCK_NAME, "a+")  # held open for the ledger's lifetime
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise LedgerError(
            f"output directory {str(out)!r} is in use by another gridmix process"
            f"{f' (pid {holder})' if holder else ''}; wait for it to finish or choose another --out"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle
