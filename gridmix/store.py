"""The run ledger: an embedded SQLite file in the output directory, one row per finished run.

Every run (track, model, grid, config, learning rate, seed) is written in one transaction when it
ends, keyed by a hash of everything that determines its numbers. A re-run of the same command skips
the rows already there, so a sweep killed at any point (SIGKILL included: SQLite's journal makes the
write atomic) resumes and loses nothing. The study's specification is kept too, so ``gridmix report
DIR`` re-renders from the ledger alone. docs/design.md section 6.

A path that holds something else (a file that is not SQLite, a database without gridmix's marker, a
non-empty directory without a ledger) is refused with a clear error; nothing is ever overwritten.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

LEDGER_NAME = "ledger.sqlite"
FORMAT = "gridmix-ledger"
VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY,
    track TEXT NOT NULL, model TEXT NOT NULL, grid TEXT NOT NULL,
    lr REAL NOT NULL, seed INTEGER NOT NULL,
    config TEXT NOT NULL,           -- JSON: budget fields and model knobs that shape the run
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
    identity = json.dumps(dict(track=track, model=model, grid=grid, lr=repr(float(lr)), seed=seed, config=config),
                          sort_keys=True)
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


class Ledger:
    """Open (or create) the ledger of the output directory ``out``."""

    def __init__(self, out: str | Path, *, create: bool = True) -> None:
        out = Path(out)
        self.path = out / LEDGER_NAME
        if out.exists() and not out.is_dir():
            raise LedgerError(f"output path {str(out)!r} is a file, not a directory; choose another --out")
        if not self.path.exists():
            if not create:
                raise LedgerError(f"{str(out)!r} holds no gridmix ledger ({LEDGER_NAME}); is it a gridmix output dir?")
            if out.exists() and any(out.iterdir()):
                raise LedgerError(f"output directory {str(out)!r} is not empty and holds no gridmix ledger; "
                                  "refusing to write into it, choose another --out")
            out.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path)
            with self._conn:
                self._conn.executescript(_SCHEMA)
                self._conn.executemany("INSERT INTO meta VALUES (?, ?)",
                                       [("format", FORMAT), ("version", str(VERSION))])
            return
        self._conn = sqlite3.connect(self.path)
        try:
            tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            marker = (dict(self._conn.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {})
        except sqlite3.DatabaseError as error:
            self._conn.close()
            raise LedgerError(f"{str(self.path)!r} is not a gridmix ledger (SQLite says: {error})") from None
        if marker.get("format") != FORMAT or "runs" not in tables:
            self._conn.close()
            raise LedgerError(f"{str(self.path)!r} is an SQLite file but not a gridmix ledger; refusing to touch it")
        if marker.get("version") != str(VERSION):
            self._conn.close()
            raise LedgerError(f"{str(self.path)!r} has ledger version {marker.get('version')}; "
                              f"this gridmix reads version {VERSION}")

    def close(self) -> None:
        self._conn.close()

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
            self._conn.execute(f"INSERT OR REPLACE INTO runs ({columns}) VALUES ({', '.join('?' * len(values))})",
                               tuple(values.values()))

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
        found = self._conn.execute("SELECT value FROM meta WHERE key = ?", (f"doc:{name}",)).fetchone()
        return None if found is None else json.loads(found[0])

    def put(self, name: str, document: dict) -> None:
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               (f"doc:{name}", json.dumps(document, sort_keys=True)))

    def study(self) -> dict | None:
        return self.fetch("study")

    def set_study(self, study: dict) -> None:
        """Store the study spec; a directory holds one study (one track on one grid)."""
        previous = self.study()
        if previous is not None and (previous["track"], previous["grid"]) != (study["track"], study["grid"]):
            raise LedgerError(f"{str(self.path.parent)!r} holds the study of track {previous['track']!r} on grid "
                              f"{previous['grid']}; it cannot also hold {study['track']!r} on {study['grid']}: "
                              "choose another --out")
        self.put("study", study)
