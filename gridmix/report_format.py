"""What every renderer of a report shares: its arms in display order, and how a number is written.

The report dict (:func:`gridmix.report.build_report`) keeps the idea apart from the other arms (``idea``,
``baselines``), as the reference report does; the Markdown, the plots, the references and the terminal
table all list them as one, through :func:`report_arms`, and write numbers through :func:`fmt`.
"""

from __future__ import annotations


def report_arms(report: dict) -> dict[str, dict]:
    """Every arm of ``report`` by model name: the idea first, then the others in the study's order."""
    return {report["idea"]["name"]: report["idea"], **report["baselines"]}


def fmt(value, digits: int = 4) -> str:
    """A number as text with ``digits`` significant digits; ``"–"`` for a missing one; anything else as is."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)
