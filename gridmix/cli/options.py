"""The options of ``gridmix run`` and ``gridmix sweep`` as ``Annotated`` types, each written once.

A command names an option by its type, ``seeds: Seeds = None``, and gives its default in its own
signature; an option the two commands share has one type here (one help text, one range), and one
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
)
from gridmix.tracks.budget import MAX_SEEDS

# shared by run and sweep
Track = Annotated[str, typer.Option(help=TRACK_HELP)]
Baselines = Annotated[
    str,
    typer.Option(
        help="Comma-separated registered mixers to add as secondary baselines (default: none)."
    ),
]
Seeds = Annotated[int, typer.Option(min=2, max=MAX_SEEDS, help=SEEDS_HELP)]
Lrs = Annotated[str, typer.Option(help=LRS_HELP)]
Device = Annotated[DeviceName, typer.Option(help=DEVICE_HELP)]
Precision = Annotated[str, typer.Option(help=PRECISION_HELP)]
Executor = Annotated[ExecutorName, typer.Option(help=EXECUTOR_HELP)]
Jobs = Annotated[str, typer.Option(help=JOBS_HELP)]
Address = Annotated[str, typer.Option(help=ADDRESS_HELP)]
Threads = Annotated[int, typer.Option(min=1, help=THREADS_HELP)]
Compile = Annotated[
    bool,
    typer.Option(
        "--compile",
        help="Train and evaluate every model compiled with torch.compile (inductor); a model that "
        "cannot be compiled trains eager, the report says so (default: eager).",
    ),
]

# gridmix run
RunGrid = Annotated[
    str, typer.Option(help="Token grid, e.g. 64, 32x32, 8x16x16 (default: the track's).")
]
RunModels = Annotated[
    str,
    typer.Option(
        help="Comma-separated models to include (default: the track's default "
        "models, else every model the grid allows: idea, baselines, ablation, "
        "control)."
    ),
]
RunIdea = Annotated[
    str,
    typer.Option(
        help="A registered mixer (see `gridmix mixers`) as the idea, in the track's "
        "backbone against its matched baseline (default: the track's idea)."
    ),
]
RunBudget = Annotated[BudgetName, typer.Option(help=BUDGET_HELP)]
Epochs = Annotated[int, typer.Option(min=1, help=EPOCHS_HELP)]
NTrain = Annotated[int, typer.Option(min=1, help=N_TRAIN_HELP)]
RunOut = Annotated[
    Path,
    typer.Option(
        help="Output directory (default: runs/TRACK-GRID-BUDGET, with -epochsN / "
        "-ntrainN when those are changed)."
    ),
]
Scaling = Annotated[
    bool, typer.Option(help="Measure time, FLOPs and memory at this grid and smaller ones.")
]
MatchParams = Annotated[
    str,
    typer.Option(
        help="Scale the idea's width argument to this baseline's parameter count "
        "(default: the idea as the track builds it)."
    ),
]
RunUnderpowered = Annotated[
    bool,
    typer.Option(
        "--underpowered",
        help="Run even when the seeds are too few for the "
        "primary comparison to reach α (reported).",
    ),
]
WithoutIdea = Annotated[
    bool,
    typer.Option(
        "--without-idea",
        help="Train only the --models given, without the idea: a learnability check with "
        "per-model results and no paired verdict (exploratory budgets: smoke).",
    ),
]
StopAboveChance = Annotated[
    float,
    typer.Option(
        metavar="MARGIN",
        help="Stop each run once its validation metric is beyond the track's chance level by "
        "MARGIN (metric units); the ledger row says why (default: train to the budget's end).",
    ),
]
AA = Annotated[
    bool,
    typer.Option(
        "--aa",
        help="An A/A study: the matched baseline against a copy of itself "
        "(independent initialisation, same data), to check the harness.",
    ),
]
MinEffect = Annotated[
    str,
    typer.Option(
        help="Smallest effect worth reporting as real: a significant difference "
        "below it is 'significant but negligible'. A percentage of the compared "
        "arm's mean (1%) or a number in the metric's units (0.005)."
    ),
]
RunFresh = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Start a fresh study in --out even if it holds results on "
        "other data (they are kept, but no longer reported).",
    ),
]
Data = Annotated[
    Path,
    typer.Option(
        help="The data of image-folder (a folder) or sequence-csv (a CSV file) "
        "(default: $GRIDMIX_IMAGE_FOLDER / $GRIDMIX_SEQUENCE_CSV)."
    ),
]
DataRoot = Annotated[
    Path,
    typer.Option(
        help="Root holding torchvision data sets (mnist, cifar10, ...) (default: "
        "$GRIDMIX_DATA_ROOT)."
    ),
]
Download = Annotated[
    bool, typer.Option(help="Let torchvision download a missing data set into --data-root.")
]
EvalGrids = Annotated[
    str,
    typer.Option(
        help="Also test every trained model on these grids, e.g. 8x8,32x32 "
        "(the transfer section; the track must define its task there; "
        "default: none)."
    ),
]
RunSet = Annotated[
    list[str],
    typer.Option(
        "--set",
        help="A track setting NAME=VALUE (repeatable; see `gridmix tracks "
        "--json`), e.g. --set pairs=8 (default: the track's "
        "values).",
    ),
]

# gridmix sweep
Over = Annotated[
    list[str],
    typer.Option(
        help="NAME=V1,V2,… to sweep: grid, or one of the track's settings (see "
        "`gridmix tracks`); repeat for a grid of points, e.g. --over "
        "grid=64,128,256."
    ),
]
SweepGrid = Annotated[
    str, typer.Option(help="The grid where grid is not swept (default: the track's).")
]
SweepSet = Annotated[
    list[str],
    typer.Option(
        "--set",
        help="A track setting NAME=VALUE held at every point "
        "(repeatable; default: the track's values).",
    ),
]
SweepModels = Annotated[
    str, typer.Option(help="Comma-separated models (default: the track's default models).")
]
SweepIdea = Annotated[
    str,
    typer.Option(
        help="A registered mixer as the idea (see `gridmix run --idea`; default: the track's idea)."
    ),
]
SweepBudget = Annotated[BudgetName, typer.Option(help=BUDGET_HELP + " At every point.")]
SweepOut = Annotated[
    Path, typer.Option(help="Output directory (default: runs/TRACK-sweep-NAMES-BUDGET).")
]
SweepUnderpowered = Annotated[
    bool, typer.Option("--underpowered", help="Run even when the seeds cannot reach α.")
]
SweepFresh = Annotated[
    bool,
    typer.Option("--fresh", help="Start afresh in --out even if it holds results on other data."),
]
