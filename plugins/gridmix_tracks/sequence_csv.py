"""The ``sequence-csv`` track: forecast the next H values of one column of the user's CSV time
series.

Configure it through the environment (``gridmix run --data FILE`` sets the first; unset, ``gridmix
tracks`` lists the track as needing data)::

    GRIDMIX_SEQUENCE_CSV=data/load.csv        # rows in time order; a header row is optional
    GRIDMIX_SEQUENCE_CSV_TARGET=load          # the column to forecast: header name or 0-based
                                              # index; default: the last
    GRIDMIX_SEQUENCE_CSV_INPUTS=all           # optional: the models read every channel, not only
                                              # the target's past
    GRIDMIX_SEQUENCE_CSV_SEASON=1             # optional: MASE's naive season m (default 1, the
                                              # previous value)

Univariate (the default, ``INPUTS=target``): the models read the target column's past only.
Multivariate (``INPUTS=all``, the ETT / Weather / Electricity layout ``date,channel,…,target``): the
first column must hold dates (:data:`DATE_FORMS`: ISO 8601, or a month, quarter or year) in
increasing order, and the models read every other column over the window, the target's channel
first. Univariate files with a date column first (a header in :data:`DATE_HEADERS`, or a first cell
such as ``1959-01-31`` or ``1959-Q1``) have their dates checked the same way. No row is ever dropped
or reordered: an empty row (in a one-column file, a missing value) is an error, not skipped. The
file is read when the registry loads, so a bad file shows up in ``gridmix tracks`` as a broken
``sequence-csv`` plugin with a one-line error naming the row and column (missing values or dates,
empty rows, non-numeric cells, no date column, dates out of order, a constant target). Chronological
split without leakage: with ``n`` rows, training windows lie wholly inside the first 70 % of rows,
validation targets inside the next 15 %, test targets inside the last 15 %; a window's input is the
``L`` rows right before its ``H`` target rows (a validation or test window may read earlier rows as
its past, never a later split's rows). Each channel is standardised with the mean and standard
deviation of the training part (a constant covariate is only centred). When there are more windows
than the budget asks for, a fixed seed (not the run's) picks which each split keeps: every seed sees
the same splits, and the report's inference is conditional on this file. Models: the ``sequence``
track's, each inside per-window instance normalisation (:mod:`gridmix_tracks.instance_norm`), since
real series trend and shift level.

Besides test MSE, every run reports MASE (:func:`mase_scale`): the mean absolute error of its
forecasts over all test windows and steps ahead, divided by the in-sample mean absolute error of the
naive forecast one season (``m`` steps) back on the training part of the target, as the M4
competition scales its errors. MASE is free of the series' units; below 1, the forecasts beat the
naive forecast's in-sample error. A season above 1 is also offered to the seasonal-naive reference
(``Track.seasons``). The track's chance level is the MSE of forecasting the training part's mean (0
in the standardised units, ``Track.training_mean``) for every step of the test windows the arms are
tested on, the same number as the training-mean reference (the level a model reaches without
learning); it declares no ceiling (an MSE of 0 is a bound, not a level real data reaches). Its
description, which the report's Data section shows, names the target column and the channels the
models read. The default budget trains up to 20 epochs, stopped after 4 without a better validation
MSE (the best epoch restored; :data:`BUDGET_OVERRIDES`), since a short real series can overfit
within a few epochs or still improve after eight.

Shape legend:
    S: windows, L: context (the grid), H: horizon, C: channels (1 univariate);
    inputs (S, C, L) float32 with the target's past in channel 0, targets (S, H) float32
"""

from __future__ import annotations

import csv
import math
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.core.suggest import did_you_mean
from gridmix.tracks import DataSizes, Split, Track, TrackData
from gridmix_tracks.common import FIXED_SPLIT_SEED, SPLITS, mse, mse_loss, split_rng
from gridmix_tracks.instance_norm import backbone_with_instance_norm, with_instance_norm
from gridmix_tracks.sequence import HORIZON, SequenceModels, context_supported

ENV, TARGET_ENV = "GRIDMIX_SEQUENCE_CSV", "GRIDMIX_SEQUENCE_CSV_TARGET"
INPUTS_ENV, SEASON_ENV = "GRIDMIX_SEQUENCE_CSV_INPUTS", "GRIDMIX_SEQUENCE_CSV_SEASON"
INPUTS = ("target", "all")  # the models read the target's past only, or every channel but the date
BOUNDARIES = (0.70, 0.85)  # fractions of rows where validation, then test targets begin
MISSING = {"", "nan", "na", "n/a", "null", "none"}
# Headers that name a univariate file's first column as its dates (checked in order); other first
# columns are dates when their first cell is a date no number spells (a year alone, 1959, could be a
# value).
DATE_HEADERS = {
    "date",
    "datetime",
    "time",
    "timestamp",
    "ds",
    "day",
    "week",
    "month",
    "quarter",
    "year",
    "period",
}
DATE_FORMS = (
    "ISO 8601 (1959-01-31, 1959-01-31T06:00), a month (1959-01), a quarter (1959-Q1, 1959Q1, 1959 "
    "Q1) or a year (1959)"
)
_MONTH, _QUARTER, _YEAR = (
    re.compile(r"^(\d{4})-(\d{2})$"),
    re.compile(r"^(\d{4})[- ]?[Qq]([1-4])$"),
    re.compile(r"^(\d{4})$"),
)
# Up to 20 epochs, stopped after 4 without a better validation MSE (the best epoch's weights
# restored): a real series may be best after 1-2 epochs and then overfit, or still improve after the
# global default's 8.
BUDGET_OVERRIDES = {"default": {"epochs": 20, "patience": 4}}
NEEDS_DATA = f"needs --data FILE (or {ENV}): a CSV time series, rows in time order"


@dataclass(frozen=True)
class CsvSeries:
    """The channels of a CSV time series that the models read, the target first."""

    path: Path
    names: tuple[str, ...]  # channel names, the target's first
    values: np.ndarray  # (T, C) float64, rows in time order, column 0 the target

    @property
    def target(self) -> str:
        return self.names[0]


def read_csv_series(
    path: str | os.PathLike, target: str | None = None, *, inputs: str = "target"
) -> CsvSeries:
    """The target column of a CSV file (``inputs="all"``: and every other channel but the date
    column).

    ``target`` is a header name or a 0-based index (``None``: the last column). The first row is a
    header when one of its cells is neither a number nor a date. No row is ever skipped or
    reordered: an empty row (in a one-column file, a missing value) is an error. With
    ``inputs="all"`` the first column must be dates (:data:`DATE_FORMS`), strictly increasing; in
    univariate mode a first column that holds dates (:func:`_is_date_column`) is checked the same
    way, though the models do not read it. ``ValueError`` names the row (1 = the file's first line)
    and column of a bad cell.
    """
    if inputs not in INPUTS:
        raise ValueError(f"{INPUTS_ENV}={inputs!r}; expected one of {INPUTS}")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{ENV}={str(path)!r}: no such file")
    try:
        with path.open(newline="") as handle:
            rows = list(enumerate(csv.reader(handle), start=1))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(
            f"{path}: cannot be read as CSV text ({type(error).__name__}: {error})"
        ) from None
    if not rows:
        raise ValueError(f"{path}: the file has no rows")
    for (
        number,
        row,
    ) in rows:  # kept, never skipped: a skipped row would shift the series by one step
        if not row:
            raise ValueError(
                f"{path}: row {number} is empty (in a one-column file, a missing value); fill or "
                "delete it first, so that no row shifts"
            )
    first = rows[0][1]
    header = first if any(_date(cell) is None and not _is_number(cell) for cell in first) else None
    body = rows[1:] if header is not None else rows
    names = (
        [name.strip() for name in header]
        if header is not None
        else [str(i) for i in range(len(first))]
    )
    index = _column_index(target, names, path)
    if inputs == "all":
        if index == 0:
            raise ValueError(
                f"{path}: the target {names[0]!r} is the date column; choose one of the channels "
                f"{', '.join(names[1:])}"
            )
        _check_dates(
            body,
            names[0],
            path,
            why=f"{INPUTS_ENV}=all needs a date column first (date,channel,…,target "
            "as ETT keeps it); ",
        )
        channels = [index] + [i for i in range(1, len(names)) if i != index]
    else:
        if index != 0 and _is_date_column(body, names[0]):
            _check_dates(body, names[0], path, why="")
        channels = [index]
    values = np.empty((len(body), len(channels)))
    for i, (number, row) in enumerate(body):
        for j, column in enumerate(channels):
            values[i, j] = _cell_value(row, number, column, names[column], path)
    return CsvSeries(path, tuple(names[column] for column in channels), values)


def _cell_value(row: list[str], number: int, column: int, name: str, path: Path) -> float:
    if column >= len(row):
        raise ValueError(
            f"{path}: row {number} has {len(row)} cells; column {name!r} is cell {column + 1}"
        )
    cell = row[column].strip()
    if cell.lower() in MISSING:
        raise ValueError(
            f"{path}: row {number}, column {name!r}: missing value {cell!r}; fill or drop it first"
        )
    if not _is_number(cell):
        raise ValueError(f"{path}: row {number}, column {name!r}: {cell!r} is not a number")
    if not math.isfinite(float(cell)):
        raise ValueError(f"{path}: row {number}, column {name!r}: {cell!r} is not a finite number")
    return float(cell)


def _is_date_column(body: list[tuple[int, list[str]]], name: str) -> bool:
    """Whether a univariate file's first column (not its target) holds dates: its header is one of
    :data:`DATE_HEADERS`, or its first cell is a date in a form no number takes (``1959-01-31``,
    ``1959-Q1``)."""
    if name.lower() in DATE_HEADERS:
        return True
    cell = body[0][1][0].strip() if body and body[0][1] else ""
    return _date(cell) is not None and not _is_number(cell)


def _check_dates(body: list[tuple[int, list[str]]], name: str, path: Path, *, why: str) -> None:
    """The first column holds dates (:data:`DATE_FORMS`), strictly increasing; ``ValueError`` names
    the first bad row (a missing date, one that is not a date, one out of order or repeated) after
    ``why`` the file needs dates."""
    previous = None
    for number, row in body:
        cell = row[0].strip()
        if not cell:
            raise ValueError(
                f"{path}: {why}row {number}, column {name!r}: missing date; every row needs its "
                "date, in time order"
            )
        when = _date(cell)
        if when is None:
            raise ValueError(
                f"{path}: {why}row {number}, column {name!r}: {cell!r} is not a date; accepted: "
                f"{DATE_FORMS}"
            )
        try:
            in_order = previous is None or when > previous[1]
        except TypeError:  # one date with a time zone, one without
            in_order = False
        if not in_order:
            raise ValueError(
                f"{path}: row {number}, column {name!r}: {cell!r} does not come after "
                f"{previous[0]!r}; rows must be in time order, each time once"
            )
        previous = (cell, when)


def _date(cell: str) -> datetime | None:
    """The cell as a date in one of :data:`DATE_FORMS` (a month, quarter or year as its first day),
    else None."""
    text = cell.strip()
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    month, quarter, year = _MONTH.match(text), _QUARTER.match(text), _YEAR.match(text)
    if month and 1 <= int(month[2]) <= 12:
        return datetime(int(month[1]), int(month[2]), 1)
    if quarter:
        return datetime(int(quarter[1]), 3 * int(quarter[2]) - 2, 1)
    return datetime(int(year[1]), 1, 1) if year else None


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
    raise ValueError(
        f"{path}: no column {column!r}{did_you_mean(column, names)} columns: {', '.join(names)} "
        f"(or an index 0..{len(names) - 1})"
    )


def window_indices(
    n: int, *, context: int, horizon: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per split, the row indices of every window's input (W, L) and target (W, H), chronologically
    split.

    ``ValueError`` when a split would get no window: the message says how many rows are needed.
    """
    ranges = _target_starts(n, context=context, horizon=horizon)
    empty = [split for split in SPLITS if len(ranges[split]) == 0]
    if empty:
        need = n + 1
        while not all(
            len(r) for r in _target_starts(need, context=context, horizon=horizon).values()
        ):
            need += 1
        raise ValueError(
            f"a series of {n} values is too short for context {context} + horizon {horizon}: "
            f"the {', '.join(empty)} split(s) get no window; need at least {need} values"
        )
    result = {}
    for split, starts in ranges.items():
        starts = np.asarray(starts)[:, None]
        result[split] = (starts - context + np.arange(context), starts + np.arange(horizon))
    return result


def _target_starts(n: int, *, context: int, horizon: int) -> dict[str, range]:
    """Per split, the rows where a window's targets may start (its input is the ``context`` rows
    before)."""
    start_val, start_test = (int(n * fraction) for fraction in BOUNDARIES)
    return {
        "train": range(context, start_val - horizon + 1),
        "val": range(max(context, start_val), start_test - horizon + 1),
        "test": range(max(context, start_test), n - horizon + 1),
    }


def mase_scale(train: np.ndarray, season: int = 1) -> float:
    """MASE's denominator: the in-sample mean absolute error of the naive forecast ``season`` steps
    back, ``mean |y_t - y_{t-m}|`` over the training series ``train`` (T,) (Hyndman & Koehler 2006;
    the M4 competition)."""
    if season < 1 or len(train) <= season:
        raise ValueError(f"MASE needs more than season {season} training values; got {len(train)}")
    return float(np.abs(train[season:] - train[:-season]).mean())


def mase(scale: float) -> Callable[[torch.Tensor, torch.Tensor], float]:
    """MASE of forecasts (S, H) against targets (S, H): their mean absolute error divided by
    ``scale``."""
    return lambda predictions, targets: (predictions - targets).abs().mean().item() / scale


def csv_sequence_track(
    path: str | os.PathLike,
    target: str | None = None,
    *,
    inputs: str = "target",
    season: int = 1,
    horizon: int = HORIZON,
) -> Track:
    """A forecasting track on one column of a CSV file (read now; ``ValueError`` names the bad
    row/column).

    ``inputs="all"`` makes it multivariate (the models read every channel); ``season`` is MASE's
    naive season.
    """
    series = read_csv_series(path, target, inputs=inputs)
    values, name = series.values, series.target  # (T, C)
    # the training part: every row before the first validation target
    start_val = int(len(values) * BOUNDARIES[0])
    if start_val <= season:
        raise ValueError(
            f"{path}: column {name!r} has {len(values)} values; a series needs many more"
        )
    train_part = values[:start_val]  # (T_train, C)
    mean, std = train_part.mean(axis=0), train_part.std(axis=0)
    if std[0] == 0:
        raise ValueError(
            f"{path}: column {name!r} is constant over the training part; nothing to forecast"
        )
    std[std == 0] = (
        1.0  # a covariate constant in training carries no information; centring it is enough
    )
    standard = torch.from_numpy(((values - mean) / std).astype(np.float32))  # (T, C)
    # in the targets' standardised units
    scale = mase_scale((train_part[:, 0] - mean[0]) / std[0], season)
    if scale == 0:
        raise ValueError(
            f"{path}: column {name!r} repeats itself every {season} step(s) over the training "
            f"part, so MASE's naive forecast is exact there; set {SEASON_ENV} to another season"
        )

    # the split follows the target series, not the path,
    target_bytes = np.ascontiguousarray(values[:, 0]).tobytes()
    # so a copy elsewhere or more covariates split alike
    identity = f"sequence-csv:{name}:{zlib.crc32(target_bytes)}"

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        try:
            windows = window_indices(len(values), context=grid[0], horizon=horizon)
        except ValueError as error:
            raise ValueError(f"{path}: column {name!r}: {error}") from None
        counts = {"train": sizes.n_train, "val": sizes.n_val, "test": sizes.n_test}
        splits = {}
        for split, (rows_in, rows_out) in windows.items():
            order = split_rng(FIXED_SPLIT_SEED, split, task=identity).permutation(len(rows_in))
            keep = np.sort(order[: counts[split]])
            splits[split] = Split(
                inputs=standard[rows_in[keep]].permute(0, 2, 1).contiguous(),  # (S, C, L)
                targets=standard[rows_out[keep], 0],
            )  # (S, H)
        return TrackData(**splits)

    channels = (
        f"reading all {len(series.names)} channels: {name!r} (the target), "
        + ", ".join(repr(other) for other in series.names[1:])
        if inputs == "all"
        else "reading the target's past only"
    )
    return _track(
        f"forecast the next {horizon} values of column {name!r} of {path} ({len(values)} rows, "
        f"{channels})",
        make_data,
        horizon=horizon,
        in_chans=len(series.names),
        source=str(path),
        extra_metrics={f"MASE (m={season})": mase(scale)},
        training_mean=0.0,
        seasons=(season,) if season > 1 else (),
    )


def awaiting_data_track(horizon: int = HORIZON) -> Track:
    """``sequence-csv`` before it is given a file: ``gridmix tracks`` lists it as needing ``--data
    FILE``, and building its data (``gridmix run``) says so in one line."""

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        raise ValueError(f"sequence-csv {NEEDS_DATA}")

    return _track(
        f"forecast the next {horizon} values of a column of your CSV time series",
        make_data,
        horizon=horizon,
        in_chans=1,
        data_missing=lambda: NEEDS_DATA,
    )


def _track(
    description: str,
    make_data,
    *,
    horizon: int,
    in_chans: int,
    source: str = "",
    extra_metrics: dict | None = None,
    data_missing=lambda: None,
    training_mean: float | None = None,
    seasons: tuple[int, ...] = (),
) -> Track:
    return Track(
        name="sequence-csv",
        description=description,
        ndim=1,
        default_grid=Grid((64,)),
        make_data=make_data,
        loss=mse_loss,
        metric=mse,
        fixed_split=True,  # one dataset, one split: seeds vary initialisation and batch order
        metric_name="test MSE",
        direction="lower",
        models=with_instance_norm(SequenceModels(horizon=horizon, in_chans=in_chans).specs()),
        backbone=backbone_with_instance_norm(
            SequenceModels(horizon=horizon, in_chans=in_chans).backbone_spec()
        ),
        matched_baseline="transformer",
        budget_overrides=BUDGET_OVERRIDES,
        training_mean=training_mean,  # the chance level: this mean's MSE on the test windows
        # an MSE of 0 is never reached on real data: no known ceiling, so no arm is "at ceiling"
        ceiling=None,
        seasons=seasons,
        supports=context_supported,
        source=source,
        data_missing=data_missing,
        extra_metrics=extra_metrics or {},
        fixed_grid="its windows are cut from the series per context length, so another grid tests "
        "other windows",
    )


def _season_from_env() -> int:
    text = os.environ.get(SEASON_ENV, "").strip() or "1"
    if not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"{SEASON_ENV}={text!r}; expected a whole number of steps >= 1 (1: the previous value)"
        )
    return int(text)


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The ``sequence-csv`` track on the file ``GRIDMIX_SEQUENCE_CSV`` names, or waiting for one."""
    path = os.environ.get(ENV, "").strip()
    if not path:
        return [awaiting_data_track()]
    return [
        csv_sequence_track(
            path,
            os.environ.get(TARGET_ENV, "").strip() or None,
            inputs=os.environ.get(INPUTS_ENV, "").strip() or "target",
            season=_season_from_env(),
        )
    ]
