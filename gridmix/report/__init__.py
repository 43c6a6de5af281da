"""The report: built from a study's ledger (:mod:`.build`) into one frozen object (:mod:`.types`), rendered as
Markdown (:mod:`.markdown`, with :mod:`.references`) and PNG plots (:mod:`.plots`), numbers written by one rule
(:mod:`.format`). ``gridmix report DIR`` redraws it from the ledger alone."""

from gridmix.report.build import ALPHA, TIMING_KEYS, build_report, write_report
from gridmix.report.types import Arm, Comparison, Report

__all__ = ["ALPHA", "TIMING_KEYS", "Arm", "Comparison", "Report", "build_report", "write_report"]
