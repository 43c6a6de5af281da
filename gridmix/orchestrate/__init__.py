"""Orchestration: a whole study (or a sweep of studies) from its options to its written report, above the harness
(:mod:`gridmix.study`), the analyses and the report (docs/design.md section 9).

:mod:`.plan` plans a study, opens its ledger, makes its executor and runs it; :mod:`.sweeping` does the same for
a sweep, one study per point; :mod:`.calibration` measures the harness's A/A false-positive rate.
"""

from gridmix.orchestrate.calibration import aa_false_positive_rate
from gridmix.orchestrate.plan import (
    Callbacks,
    Outcome,
    PlannedStudy,
    choose_eval_grids,
    choose_settings,
    make_executor,
    open_ledger,
    plan_study,
    run,
    run_study,
)
from gridmix.orchestrate.sweeping import (
    PlannedSweep,
    SweepOutcome,
    open_sweep_ledger,
    plan_sweep,
    run_sweep,
    sweep,
)

__all__ = [
    "Callbacks",
    "Outcome",
    "PlannedStudy",
    "PlannedSweep",
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
