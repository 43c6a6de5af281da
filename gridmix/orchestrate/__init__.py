"""Orchestration: a whole study (or a sweep of studies) from its options to its written report,
above the harness (:mod:`gridmix.study`), the analyses and the report (docs/design.md section 9).

:mod:`.front_door` is the way in (:func:`run` and :func:`sweep`, also ``gridmix.run`` and
``gridmix.sweep``); the steps it takes are :mod:`.plan` (a study planned and checked, with
:mod:`.leak_check`), :mod:`.execute` (its ledger, its executor, its runs and report) and
:mod:`.sweeping` (the same for a sweep, one study per point); :mod:`.callbacks` is how they report
progress. :mod:`.calibration` measures the harness's A/A false-positive rate.

The names load on first use (:func:`gridmix.core.lazy.lazy_names`): the command line imports
:mod:`.callbacks` (no torch) before its cheap checks, and the rest only once they pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridmix.core.lazy import lazy_names

if TYPE_CHECKING:  # the same names, for type checkers and readers
    from gridmix.orchestrate.calibration import aa_false_positive_rate
    from gridmix.orchestrate.callbacks import Callbacks
    from gridmix.orchestrate.execute import Outcome, make_executor, open_ledger, run_study
    from gridmix.orchestrate.front_door import StorageError, run, sweep
    from gridmix.orchestrate.plan import (
        PlannedStudy,
        choose_eval_grids,
        choose_settings,
        plan_study,
    )
    from gridmix.orchestrate.sweeping import (
        PlannedSweep,
        SweepOutcome,
        open_sweep_ledger,
        plan_sweep,
        run_sweep,
    )

_SOURCES = {  # public name -> the module that defines it
    "aa_false_positive_rate": "gridmix.orchestrate.calibration",
    "Callbacks": "gridmix.orchestrate.callbacks",
    **dict.fromkeys(
        ("Outcome", "make_executor", "open_ledger", "run_study"), "gridmix.orchestrate.execute"
    ),
    **dict.fromkeys(("StorageError", "run", "sweep"), "gridmix.orchestrate.front_door"),
    **dict.fromkeys(
        ("PlannedStudy", "choose_eval_grids", "choose_settings", "plan_study"),
        "gridmix.orchestrate.plan",
    ),
    **dict.fromkeys(
        ("PlannedSweep", "SweepOutcome", "open_sweep_ledger", "plan_sweep", "run_sweep"),
        "gridmix.orchestrate.sweeping",
    ),
}

__all__ = [
    "Callbacks",
    "Outcome",
    "PlannedStudy",
    "PlannedSweep",
    "StorageError",
    "SweepOutcome",
    "aa_false_positive_rate",
    "choose_eval_grids",
    "choose_settings",
    "make_executor",
    "open_ledger",
    "open_sweep_ledger",
    "plan_study",
    "plan_sweep",
    "run",
    "run_study",
    "run_sweep",
    "sweep",
]


__getattr__, __dir__ = lazy_names("gridmix.orchestrate", _SOURCES, globals())
