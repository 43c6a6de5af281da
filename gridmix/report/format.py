"""How every renderer of a report writes a number: :func:`fmt`, and :func:`fmt_column` for a column
of them.

The rule, one for the Markdown, the plots, the naive references' lines, the terminal tables and the
log lines:

* an integer in full, with thousands separators (``12,345``);
* a float to :data:`DIGITS` significant digits (``0.6931``, ``-0.01333``), in whole numbers from
  ``10**DIGITS`` up (``12,346``, never ``1.235e+04``), in scientific notation below ``1e-4``
  (``3.9e-07``); ``"–"`` for a missing one;
* numbers of one kind that are read against each other (a table's column of means, of standard
  deviations, of differences) share one number of decimals, so the column lines up: the fewest that
  give every entry
  :data:`DIGITS` significant digits (``0.012910``, ``0.006872``, not ``0.01291``, ``0.006872``), but
  at most
  :data:`EXTRA_DECIMALS` more than the column's largest magnitude needs (a difference of ``3.9e-07``
  beside ones of ``0.002`` reads ``-0.00000039``, and beside ones of ``0.5`` ``-0.000000``, which is
  what it is at that scale).

:func:`markdown_table` lays the cells so written out as the lines of a Markdown table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

DIGITS = 4
EXTRA_DECIMALS = 2


def fmt(value, digits: int = DIGITS) -> str:
    """A number as text by the module's rule; ``"–"`` for a missing one; anything else as is."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0:
            return f"{value:g}"
        if abs(value) >= 10**digits:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def column_decimals(values, digits: int = DIGITS) -> int | None:
    """The decimals :func:`fmt_column` writes ``values`` with: enough for the smallest finite
    non-zero magnitude to show ``digits`` significant digits, at most :data:`EXTRA_DECIMALS` more
    than the largest needs (and none for whole numbers from ``10**(digits - 1)`` up); ``None`` when
    no value is a non-zero finite float."""
    magnitudes = [abs(v) for v in values if isinstance(v, float) and math.isfinite(v) and v != 0]
    if not magnitudes:
        return None

    def needed(magnitude: float) -> int:
        return max(0, digits - 1 - math.floor(math.log10(magnitude)))

    return min(needed(min(magnitudes)), needed(max(magnitudes)) + EXTRA_DECIMALS)


def fmt_column(values, digits: int = DIGITS) -> list[str]:
    """The column ``values`` as text: every finite float with the column's :func:`column_decimals`,
    the rest (integers, missing values, non-finite ones) by :func:`fmt`."""
    decimals = column_decimals(values, digits)
    return [
        f"{value:,.{decimals}f}"
        if decimals is not None and isinstance(value, float) and math.isfinite(value)
        else fmt(value, digits)
        for value in values
    ]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table: ``header``, its rule, then one line per row of cells."""
    return [_table_line(header), "|" + "---|" * len(header), *map(_table_line, rows)]


def _table_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
