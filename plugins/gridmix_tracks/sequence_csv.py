"""The ``sequence-csv`` track: forecast the next H values of one column of the user's CSV time series.

Configure it through the environment (unset, this plugin adds nothing)::

    GRIDMIX_SEQUENCE_CSV=data/load.csv        # rows in time order; a header row is optional
    GRIDMIX_SEQUENCE_CSV_COLUMN=load          # header name or 0-based index; default: the last column

The file is read when the registry loads, so a bad file shows up in ``gridmix tracks`` as a broken
``sequence-csv`` plugin with a one-line error naming the row and column (missing values, non-numeric
cells, a constant column). Chronological split without leakage: with ``n`` rows, training windows lie
wholly inside the first 70 % of rows, validation targets inside the next 15 %, test targets inside the
last 15 %; a window's input is the ``L`` rows right before its ``H`` target rows (a validation or test
window may read earlier rows as its past, never a later split's rows). Values are standardised with the
mean and standard deviation of the training part. When there are more windows than the budget asks for,
a fixed seed (not the run's) picks which each split keeps: every seed sees the same splits, and the
report's inference is conditional on this file. Models: the ``sequence`` track's, each inside per-window instance
normalisation (:mod:`gridmix_tracks.instance_norm`), since real series trend and shift level.

Shape legend:
    S: windows, L: context (the grid), H: horizon; inputs (S, 1, L) float32, targets (S, H) float32
"""

from __future__ import annotations

import csv
import difflib
import math
import os
from pathlib import Path

import numpy as np
import torch

from gridmix import hookimpl
from gridmix.grid import Grid
from gridmix.tracks import DataSizes, Split, Track, TrackData
from gridmix_tracks.common import FIXED_SPLIT_SEED, SPLITS, mse, mse_loss, split_rng
from gridmix_tracks.instance_norm import with_instance_norm
from gridmix_tracks.sequence import HORIZON, SequenceModels, context_supported

ENV, COLUMN_ENV = "GRIDMIX_SEQUENCE_CSV", "GRIDMIX_SEQUENCE_CSV_COLUMN"
BOUNDARIES = (0.70, 0.85)  # fractions of rows where validation, then test targets begin
MISSING = {"", "nan", "na", "n/a", "null", "none"}


def read_series(path: str | os.PathLike, column: str | None = None) -> tuple[np.ndarray, str]:
    """One column of a CSV file as float64 values, and the column's name; ``ValueError`` on any bad cell.

    ``column`` is a header name or a 0-based index (``None``: the last column). The first row is a
    header when any of its cells is not a number. Rows are numbered as in the file (1 = first line).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{ENV}={str(path)!r}: no such file")
    try:
        with path.open(newline="") as handle:
            rows = [(number, row) for number, row in enumerate(csv.reader(handle), start=1) if row]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(f"{path}: cannot be read as CSV text ({type(error).__name__}: {error})") from None
    if not rows:
        raise ValueError(f"{path}: the file has no rows")
    header = rows[0][1] if any(not _is_number(cell) for cell in rows[0][1]) else None
    body = rows[1:] if header is not None else rows
    names = [name.strip() for name in header] if header is not None else [str(i) for i in range(len(rows[0][1]))]
    index = _column_index(column, names, path)
    name = names[index]
    values = np.empty(len(body))
    for i, (number, row) in enumerate(body):
        if index >= len(row):
            raise ValueError(f"{path}: row {number} has {len(row)} cells; column {name!r} is cell {index + 1}")
        cell = row[index].strip()
        if cell.lower() in MISSING:
            raise ValueError(f"{path}: row {number}, column {name!r}: missing value {cell!r}; fill or drop it first")
        if not _is_number(cell):
            raise ValueError(f"{path}: row {number}, column {name!r}: {cell!r} is not a number")
        values[i] = float(cell)
        if not math.isfinite(values[i]):
            raise ValueError(f"{path}: row {number}, column {name!r}: {cell!r} is not a finite number")
    return values, name


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _column_index(column: str | None, names: list[str], path: Path) -> int:
    if column is None or column == "":
        return len(names) - 1
    if column in names:
        return names.index(column)
    if column.isdigit() and int(column) < len(names):
        return int(column)
    close = difflib.get_close_matches(column, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"{path}: no column {column!r}{hint} columns: {', '.join(names)} "
                     f"(or an index 0..{len(names) - 1})")


def window_indices(n: int, *, context: int, horizon: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per split, the row indices of every window's input (W, L) and target (W, H), chronologically split.

    ``ValueError`` when a split would get no window: the message says how many rows are needed.
    """
    ranges = _target_starts(n, context=context, horizon=horizon)
    empty = [split for split in SPLITS if len(ranges[split]) == 0]
    if empty:
        need = n + 1
        while not all(len(r) for r in _target_starts(need, context=context, horizon=horizon).values()):
            need += 1
        raise ValueError(f"a series of {n} values is too short for context {context} + horizon {horizon}: "
                         f"the {', '.join(empty)} split(s) get no window; need at least {need} values")
    result = {}
    for split, starts in ranges.items():
        starts = np.asarray(starts)[:, None]
        result[split] = (starts - context + np.arange(context), starts + np.arange(horizon))
    return result


def _target_starts(n: int, *, context: int, horizon: int) -> dict[str, range]:
    """Per split, the rows where a window's targets may start (its input is the ``context`` rows before)."""
    start_val, start_test = (int(n * fraction) for fraction in BOUNDARIES)
    return {
        "train": range(context, start_val - horizon + 1),
        "val": range(max(context, start_val), start_test - horizon + 1),
        "test": range(max(context, start_test), n - horizon + 1),
    }


def csv_sequence_track(path: str | os.PathLike, column: str | None = None, *, horizon: int = HORIZON) -> Track:
    """A forecasting track on one column of a CSV file (read now; ``ValueError`` names the bad row/column)."""
    values, name = read_series(path, column)
    if len(values) < 2:
        raise ValueError(f"{path}: column {name!r} has {len(values)} values; a series needs many more")

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        try:
            windows = window_indices(len(values), context=grid[0], horizon=horizon)
        except ValueError as error:
            raise ValueError(f"{path}: column {name!r}: {error}") from None
        train_part = values[: windows["train"][1].max() + 1]
        scale = train_part.std()
        if scale == 0:
            raise ValueError(f"{path}: column {name!r} is constant over the training part; nothing to forecast")
        series = torch.from_numpy(((values - train_part.mean()) / scale).astype(np.float32))
        counts = {"train": sizes.n_train, "val": sizes.n_val, "test": sizes.n_test}
        splits = {}
        for split, (inputs, targets) in windows.items():
            order = split_rng(FIXED_SPLIT_SEED, split, task=f"sequence-csv:{path}").permutation(len(inputs))
            keep = np.sort(order[: counts[split]])
            splits[split] = Split(inputs=series[inputs[keep]][:, None, :], targets=series[targets[keep]])
        return TrackData(**splits)

    return Track(
        name="sequence-csv",
        description=f"forecast the next {horizon} values of column {name!r} of {path} ({len(values)} rows)",
        ndim=1,
        default_grid=Grid((64,)),
        make_data=make_data,
        loss=mse_loss,
        metric=mse,
        fixed_split=True,  # one dataset, one split: seeds vary initialisation and batch order
        metric_name="test MSE",
        direction="lower",
        models=with_instance_norm(SequenceModels(horizon=horizon).specs()),
        matched_baseline="transformer",
        supports=context_supported,
        source=str(path),
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The ``sequence-csv`` track when ``GRIDMIX_SEQUENCE_CSV`` is set, else nothing."""
    path = os.environ.get(ENV, "").strip()
    return [csv_sequence_track(path, os.environ.get(COLUMN_ENV, "").strip() or None)] if path else []
