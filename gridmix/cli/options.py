"""The options of ``gridmix run``, ``gridmix sweep`` and ``gridmix suite`` as ``Annotated`` types,
each written once.

A command names an option by its type, ``seeds: Seeds = None``, and gives its default in its own
signature; an option the commands share has one type here (one help text, one range), and one
whose help differs between them has a type per command (``RunModels``, ``SweepModels``). The help
texts of the budget, the device and the other shared choices are :mod:`gridmix.cli.app`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gridmix.cli.app import (
    ADDRESS_HELP,
    BUDGET_HELP,
    DEVICE_HELP,
    EPOCHS_HELP,
    EXECUTOR_HELP,
    JOBS_HELP,
    LRS_HELP,
    N_TRAIN_HELP,
    PRECISION_HELP,
    SEEDS_HELP,
    THREADS_HELP,
    TRACK_HELP,
    BudgetName,
    DeviceName,
    ExecutorName,
    choice,
)
from gridmix.tracks.budget import MAX_SEEDS


def option(kind: type, help: str, *names: str, **limits) -> object:
    """A command's option type: ``Annotated[kind, typer.Option(*names, help=help, **limits)]``
    (``names``: its flags where not the parameter's own, ``limits``: ``min``, ``max``)."""
    return Annotated[kind, typer.Option(*names, help=help, **limits)]


# shared by run and sweep, some by suite too
Track = option(str, TRACK_HELP)
Baselines = option(
    str, "Comma-separated registered mixers to add as secondary baselines (default: none)."
)
Seeds = option(int, SEEDS_HELP, min=2, max=MAX_SEEDS)
Lrs = option(str, LRS_HELP)
Device = option(DeviceName, DEVICE_HELP, **choice(DeviceName, "a device"))
Precision = option(str, PRECISION_HELP)
Executor = option(ExecutorName, EXECUTOR_HELP, **choice(ExecutorName, "an executor"))
Jobs = option(str, JOBS_HELP)
Address = option(str, ADDRESS_HELP)
Threads = option(int, THREADS_HELP, min=1)
Compile = option(
    bool,
    "Train and evaluate every model compiled with torch.compile (inductor); a model that cannot be "
    "compiled trains eager, the report says so (default: eager).",
    "--compile",
)

# gridmix run
RunGrid = option(str, "Token grid, e.g. 64, 32x32, 8x16x16 (default: the track's).")
RunModels = option(
    str,
    "Comma-separated models to include (default: the track's default models, else every model the "
    "grid allows: idea, baselines, ablation, control).",
)
RunIdea = option(
    str,
    "A registered mixer (see `gridmix mixers`) as the idea, in the track's backbone against its "
    "matched baseline (default: the track's idea).",
)
RunBudget = option(BudgetName, BUDGET_HELP, **choice(BudgetName, "a budget"))
Epochs = option(int, EPOCHS_HELP, min=1)
NTrain = option(int, N_TRAIN_HELP, min=1)
RunOut = option(
    Path,
    "Output directory (default: runs/TRACK-GRID-BUDGET, with -epochsN / -ntrainN when those are "
    "changed).",
)
Scaling = option(bool, "Measure time, FLOPs and memory at this grid and smaller ones.")
MatchParams = option(
    str,
    "Scale the idea's width argument to this baseline's parameter count (default: the idea as the "
    "track builds it).",
)
RunUnderpowered = option(
    bool,
    "Run even when the seeds are too few for the primary comparison to reach α (reported).",
    "--underpowered",
)
WithoutIdea = option(
    bool,
    "Train only the --models given, without the idea: a learnability check with per-model results "
    "and no paired verdict (exploratory budgets: smoke).",
    "--without-idea",
)
StopAboveChance = option(
    float,
    "Stop each run once its validation metric is beyond the track's chance level by MARGIN (metric "
    "units); the ledger row says why (default: train to the budget's end).",
    metavar="MARGIN",
)
AA = option(
    bool,
    "An A/A study: the matched baseline against a copy of itself (independent initialisation, same "
    "data), to check the harness.",
    "--aa",
)
MinEffect = option(
    str,
    "Smallest effect worth reporting as real: a significant difference below it is 'significant "
    "but negligible'. A percentage of the compared arm's mean (1%) or a number in the metric's "
    "units (0.005).",
)
RunFresh = option(
    bool,
    "Start a fresh study in --out even if it holds results on other data (they are kept, but no "
    "longer reported).",
    "--fresh",
)
Data = option(
    Path,
    "The data of image-folder (a folder) or sequence-csv (a CSV file) (default: "
    "$GRIDMIX_IMAGE_FOLDER / $GRIDMIX_SEQUENCE_CSV).",
)
DataRoot = option(
    Path, "Root holding torchvision data sets (mnist, cifar10, ...) (default: $GRIDMIX_DATA_ROOT)."
)
Download = option(bool, "Let torchvision download a missing data set into --data-root.")
EvalGrids = option(
    str,
    "Also test every trained model on these grids, e.g. 8x8,32x32 (the transfer section; the track "
    "must define its task there; default: none).",
)
RunSet = option(
    list[str],
    "A track setting NAME=VALUE (repeatable; see `gridmix tracks --json`), e.g. --set pairs=8 "
    "(default: the track's values).",
    "--set",
)

# gridmix sweep
Over = option(
    list[str],
    "NAME=V1,V2,… to sweep: grid, or one of the track's settings (see `gridmix tracks`); repeat "
    "for a grid of points, e.g. --over grid=64,128,256.",
)
SweepGrid = option(str, "The grid where grid is not swept (default: the track's).")
SweepSet = option(
    list[str],
    "A track setting NAME=VALUE held at every point (repeatable; default: the track's values).",
    "--set",
)
SweepModels = option(str, "Comma-separated models (default: the track's default models).")
SweepIdea = option(
    str, "A registered mixer as the idea (see `gridmix run --idea`; default: the track's idea)."
)
SweepBudget = option(BudgetName, BUDGET_HELP + " At every point.", **choice(BudgetName, "a budget"))
SweepOut = option(Path, "Output directory (default: runs/TRACK-sweep-NAMES-BUDGET).")
SweepUnderpowered = option(bool, "Run even when the seeds cannot reach α.", "--underpowered")
SweepFresh = option(
    bool, "Start afresh in --out even if it holds results on other data.", "--fresh"
)

# gridmix suite
SuiteTracks = option(
    str,
    "Comma-separated tracks (default: the graded grid tasks recall, pathfinder, copy, occlusion, "
    "then mqar and sequence; a default track a mixer named cannot serve is left out, and said).",
)
SuiteRungs = option(
    list[str],
    "TRACK=RUNG,RUNG,… to train those rungs of that track's ladder only (repeatable; default: the "
    "whole ladder), e.g. --rungs recall=pairs-1,pairs-2.",
)
SuiteBaselines = option(
    str,
    "Comma-separated registered mixers to add as secondary baselines, at every budget, smoke "
    "included (default: none).",
)
SuiteBudget = option(
    BudgetName,
    BUDGET_HELP + " smoke: the idea, attention and the --baselines named only, the two lowest "
    "rungs (of those --rungs names), the smallest grid.",
    **choice(BudgetName, "a budget"),
)
SuiteOut = option(
    Path, "Output directory, one ledger per track inside (default: runs/suite-BUDGET)."
)
SuiteFraction = option(
    float,
    "Reach: the share of the way from chance to ceiling a mean must stay above.",
    min=0.01,
    max=0.99,
)
