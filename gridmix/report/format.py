"""How every renderer of a report writes a number: :func:`fmt`.

The Markdown, the plots, the naive references' lines, the terminal table and the per-run log lines all write
numbers through it; the arms in display order are :attr:`gridmix.report.types.Report.arms`.
"""

from __future__ import annotations


def fmt(value, digits: int = 4) -> str:
    """A number as text with ``digits`` significant digits; ``"–"`` for a missing one; anything else as is."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)
