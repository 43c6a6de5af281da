"""A study's per-seed results as flat rows, for ``gridmix export DIR --csv`` (or ``--json``): one
row per run of the study, sweep and comparison alike, straight from the ledger (no statistics), in
the study's order.

Columns (:data:`COLUMNS`): ``phase`` (``sweep``: the run's seed chose the learning rate and enters
no comparison; ``comparison``: a paired seed at the model's chosen rate), ``model``, ``role``,
``lr``, ``seed``, ``status`` (``ok``, ``diverged``, ``failed`` or ``missing``, not yet run),
``val_metric`` and ``test_metric`` (the track's metric on the validation and the test split),
``epochs_done``, ``wall_s`` and ``error``.
"""

from __future__ import annotations

from gridmix.study.ledger import Ledger
from gridmix.study.spec import Study, choose_learning_rates

COLUMNS = (
    "phase",
    "model",
    "role",
    "lr",
    "seed",
    "status",
    "val_metric",
    "test_metric",
    "epochs_done",
    "wall_s",
    "error",
)


def export_rows(ledger: Ledger) -> tuple[Study, list[dict]]:
    """The ledger's study and one dict per run (:data:`COLUMNS`); ``ValueError`` when the ledger
    holds no study."""
    spec = ledger.study()
    if spec is None:
        raise ValueError(
            f"the ledger {str(ledger.path)!r} holds no study yet; run `gridmix run` first"
        )
    try:
        study = Study.from_dict(spec)
    except (KeyError, TypeError) as error:
        raise ValueError(
            f"the study spec in {str(ledger.path)!r} is incomplete or foreign "
            f"({type(error).__name__}: {error}); was it written by `gridmix run`?"
        ) from None
    rows = {row.key: row for row in ledger.rows()}
    chosen, _ = choose_learning_rates(study, rows)
    out = []
    for phase, tasks in (("sweep", study.sweep_tasks()), ("comparison", study.final_tasks(chosen))):
        for task in tasks:
            row = rows.get(task.key)
            out.append(
                dict(
                    phase=phase,
                    model=task.model,
                    role=study.role(task.model),
                    lr=task.lr,
                    seed=task.seed,
                    status=row.status if row else "missing",
                    val_metric=row.val_metric if row else None,
                    test_metric=row.test_metric if row else None,
                    epochs_done=row.epochs_done if row else 0,
                    wall_s=row.wall_s if row else None,
                    error=row.error if row else "",
                )
            )
    return study, out
