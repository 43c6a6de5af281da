"""Run budgets: how many seeds, learning rates, epochs and samples a comparison spends.

``smoke`` is for tests and CI (well under a minute a track); ``default`` completes a full paired
comparison on a 2-core laptop CPU in minutes; ``full`` is the scale of the reference study
(``tests/data/reference_report.json``: 8 seeds, 3 learning rates). A track may change any field per
budget through ``Track.budget_overrides`` (``Track.budget(name)`` applies them); the command line
may change seeds, learning rates, epochs and the training-set size (``--seeds``, ``--lrs``,
``--epochs``, ``--n-train``), and the study records what it changed. :class:`DataSizes` (how many
samples each split holds) lives here, below the track contract that passes it to ``make_data``, so
this module needs nothing of the contract.

Why 6 seeds by default: the exact sign-flip test on n pairs cannot go below ``2/2ⁿ``, so n = 5 can
never reach p < 0.05 (2/32 = 0.0625); n = 6 can (2/64 ≈ 0.031). That holds for the *primary*
comparison, which is tested alone at α (docs/analysis.md, "Which comparison decides"); `gridmix run`
refuses, before any training, seeds that cannot reach it
(:func:`gridmix.analysis.stats.seeds_needed`). ``smoke`` is the one exception, marked
``exploratory``: it checks that a track runs end to end, its 2 seeds can never reach α, and its
report says so instead of giving a verdict.

The ``default`` budget sweeps three learning rates, and so does every built-in track's: with two,
every choice is at an edge of the sweep and the report's "learning rate at the edge" check could say
nothing.

Sweep seeds are separate: the learning-rate sweep runs on ``sweep_seeds`` seeds of its own (1000,
1001, …; :mod:`gridmix.study.harness`), never on the seeds the paired test compares.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

# The most paired seeds a study takes: its comparison seeds 0 … 999 stay below the sweep seeds
# (1000, 1001, …; gridmix.study.spec.SWEEP_SEED_OFFSET). Past 20 pairs the sign-flip test samples
# 100,000 sign patterns in batches of 10,000 × seeds signs, 80 MB at this limit (docs/guide.md,
# "Input checks").
MAX_SEEDS = 1000


@dataclass(frozen=True)
class DataSizes:
    """How many samples each split holds (the run budget chooses these)."""

    n_train: int
    n_val: int
    n_test: int


@dataclass(frozen=True)
class Budget:
    name: str
    seeds: int  # paired seeds in the final comparison (0 … seeds − 1)
    sweep_seeds: int  # seeds of their own (1000, 1001, …) each learning rate is tried on
    lrs: tuple[float, ...]
    epochs: int
    batch_size: int
    n_train: int
    n_val: int
    n_test: int
    weight_decay: float = 0.05
    warmup_frac: float = 0.1  # linear warm-up, then cosine decay, over all optimiser steps
    patience: int | None = (
        None  # stop after this many epochs without a better validation metric (epochs: the cap)
    )
    exploratory: bool = (
        False  # a plumbing check: may have too few seeds for a verdict (the report says so)
    )

    @property
    def sizes(self) -> DataSizes:
        return DataSizes(n_train=self.n_train, n_val=self.n_val, n_test=self.n_test)

    def __post_init__(self) -> None:
        if not 2 <= self.seeds <= MAX_SEEDS:
            raise ValueError(
                f"budget {self.name!r}: seeds={self.seeds}; a paired comparison needs 2 to "
                f"{MAX_SEEDS} (comparison seeds stay below the sweep seeds, {MAX_SEEDS} on)"
            )
        if self.sweep_seeds < 1:
            raise ValueError(f"budget {self.name!r}: sweep_seeds={self.sweep_seeds}; expected >= 1")
        if not self.lrs or any(not (math.isfinite(lr) and lr > 0) for lr in self.lrs):
            raise ValueError(
                f"budget {self.name!r}: lrs={self.lrs}; expected finite positive learning rates"
            )
        if len(set(self.lrs)) != len(self.lrs):
            raise ValueError(
                f"budget {self.name!r}: lrs={self.lrs} repeats a learning rate; expected each once"
            )
        if self.patience is not None and self.patience < 1:
            raise ValueError(
                f"budget {self.name!r}: patience={self.patience}; expected None or >= 1"
            )


# One budget a row, its fields in the order Budget declares them (the table is kept as written).
# fmt: off
BUDGETS: dict[str, Budget] = {budget.name: budget for budget in (
    #      name       seeds sweep_seeds lrs                 epochs batch_size n_train n_val n_test
    Budget("smoke",   2,    1,          (1e-3, 3e-3),       2,     32,        128,    64,   64,
           exploratory=True),
    Budget("default", 6,    2,          (1e-3, 3e-3, 1e-2), 8,     32,        1024,   256,  512),
    Budget("full",    8,    4,          (1e-3, 3e-3, 9e-3), 30,    64,        4096,   1024, 2048),
)}
# fmt: on


COMMAND_LINE_FIELDS = (
    "seeds",
    "lrs",
    "epochs",
    "n_train",
)  # what `gridmix run` may change (--seeds, --lrs, …)


def resolve_budget(
    name: str,
    overrides: Mapping[str, Mapping] | None = None,
    *,
    owner: str = "the track",
    seeds: int | None = None,
    lrs: tuple[float, ...] | None = None,
    epochs: int | None = None,
    n_train: int | None = None,
) -> Budget:
    """The budget ``name``: the built-in one, then ``overrides[name]`` (a track's
    ``budget_overrides``, named ``owner`` in errors), then the user's ``seeds``, ``lrs``, ``epochs``
    and ``n_train`` (the command line's)."""
    if name not in BUDGETS:
        raise ValueError(f"unknown budget {name!r}; expected one of {sorted(BUDGETS)}")
    changes = dict((overrides or {}).get(name, {}))
    unknown = set(changes) - {f.name for f in dataclasses.fields(Budget)}
    if unknown:
        raise ValueError(f"{owner} overrides unknown budget fields {sorted(unknown)}")
    changes.update(command_line_changes(seeds=seeds, lrs=lrs, epochs=epochs, n_train=n_train))
    for field_name in ("epochs", "n_train"):
        if field_name in changes and changes[field_name] < 1:
            raise ValueError(f"budget {name!r}: {field_name}={changes[field_name]}; expected >= 1")
    return dataclasses.replace(BUDGETS[name], **changes)


def command_line_changes(**values) -> dict:
    """The budget fields the command line sets (those not ``None``), by name: what a study records
    as changed."""
    unknown = set(values) - set(COMMAND_LINE_FIELDS)
    if unknown:
        raise ValueError(
            f"budget fields {sorted(unknown)} cannot be set on the command line; expected some of "
            f"{list(COMMAND_LINE_FIELDS)}"
        )
    return {
        key: tuple(value) if key == "lrs" else value
        for key, value in values.items()
        if value is not None
    }


def describe(budget: Budget) -> str:
    """One line naming what the budget spends: seeds, sweep seeds, learning rates, epochs (and
    patience), batch, split sizes; what ``gridmix budgets`` and ``gridmix run --help`` print."""
    epochs = f"{budget.epochs} epochs" + (
        f" (stopping after {budget.patience} without a better validation metric)"
        if budget.patience
        else ""
    )
    return (
        f"{budget.seeds} seeds, {budget.sweep_seeds} sweep "
        f"seed{'s' if budget.sweep_seeds != 1 else ''}, "
        f"lrs {', '.join(f'{lr:g}' for lr in budget.lrs)}, {epochs}, batch {budget.batch_size}, "
        f"{budget.n_train}/{budget.n_val}/{budget.n_test} train/val/test samples"
        + ("; exploratory: too few seeds for a verdict" if budget.exploratory else "")
    )
