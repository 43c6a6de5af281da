"""The report: built from a study's ledger (:mod:`.build`) into one frozen object (:mod:`.types`),
rendered as Markdown (:mod:`.markdown`, with :mod:`.references`) and PNG plots (:mod:`.plots`),
numbers written by one rule (:mod:`.format`). ``gridmix report DIR`` redraws it from the ledger
alone.

The names below load on first use (PEP 562), so :mod:`.format` imports without the statistics and
torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridmix.core.lazy import lazy_names

# The same names, for type checkers and readers (and the layer test, which reads imports).
if TYPE_CHECKING:
    from gridmix.report.build import TIMING_KEYS, build_report, write_report
    from gridmix.report.types import Arm, Comparison, Report

_SOURCES = {
    **dict.fromkeys(("TIMING_KEYS", "build_report", "write_report"), "gridmix.report.build"),
    **dict.fromkeys(("Arm", "Comparison", "Report"), "gridmix.report.types"),
}

__all__ = ["TIMING_KEYS", "Arm", "Comparison", "Report", "build_report", "write_report"]


__getattr__, __dir__ = lazy_names("gridmix.report", _SOURCES, globals())
