"""The paired-seed study's plan: learning-rate sweep, then every comparison seed at each model's
chosen rate.

docs/design.md section 5. A :class:`Study` names a track, a grid, the models and a budget. Every
model sweeps the same learning rates on ``budget.sweep_seeds`` *sweep seeds* (1000, 1001, …) and
keeps the rate with the best mean *validation* metric (never test): :func:`choose_learning_rates`;
rates where any run diverged or failed are excluded. Then every *comparison seed* (0 …
``budget.seeds`` − 1) runs at the chosen rate. The two sets of seeds are disjoint, so the runs that
chose a rate never enter the paired test (no selection bias in the numbers the test uses); with a
single learning rate there is nothing to choose and no sweep runs. Each run is a :class:`RunTask`
(its key and its ledger row); :func:`study_progress` and :func:`pending_models` say how far the
ledger is through the phases.

An A/A study (:func:`aa_study`) compares the matched baseline with a copy of itself
(:data:`AA_SUFFIX`): same data and batch order per seed, an independent initialisation; its
false-positive rate checks the harness and the test together.

:mod:`gridmix.study.harness` trains the runs; this module imports no torch, so the commands that
only read a ledger (``gridmix status``, ``gridmix export``) start at once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gridmix.core.defaults import ROLES
from gridmix.core.records import pick
from gridmix.study.ledger import RunRow, run_key
from gridmix.tracks.budget import MAX_SEEDS, Budget

if TYPE_CHECKING:  # the type of a finished run's result; importing it at run time costs torch
    from gridmix.study.train import RunResult

SWEEP_SEED_OFFSET = (
    MAX_SEEDS  # sweep seeds are 1000, 1001, …: never a comparison seed (0 … seeds − 1 < MAX_SEEDS)
)
AA_SUFFIX = (
    "~aa"  # "vit~aa": the model "vit" initialised from another seed (an A/A study's second arm)
)
AA_INIT_OFFSET = (
    500_000  # the copy's initialisation seed is seed + this; its data and batch order stay seed's
)

# Budget fields that change what a single run computes (seeds / sweep_seeds / lrs only choose which
# runs exist).
_RUN_SHAPING = ("epochs", "batch_size", "n_train", "n_val", "n_test", "weight_decay", "warmup_frac")
# the stored name of model_kwargs in a run's config and a study spec (kept so stored run keys and
# specs do not change)
STORED_KWARGS_KEY = "knobs"


@dataclass(frozen=True)
class RunTask:
    """One training run; picklable, so any executor can ship it to a worker."""

    track: str
    model: str
    grid: str
    lr: float
    seed: int
    budget: Budget
    device: str  # "cpu" or "cuda", already resolved
    threads: int
    model_kwargs: dict = field(default_factory=dict)  # keyword overrides of the model's builder
    precision: str = (
        "fp32"  # or "bf16" / "fp16" mixed precision (gridmix.study.precision), already resolved
    )
    # the study's data fingerprint (gridmix.study.fingerprint); empty in ledgers written before it
    data: str = ""
    # the model's role in the study (``--idea`` can change the track's); not part of the run's key
    role: str = ""
    # the track's settings this run sets (Track.settings), off default
    settings: dict = field(default_factory=dict)
    # grids the trained model is also tested on (gridmix.study.transfer); not keyed
    eval_grids: tuple[str, ...] = ()
    # a sweep run (its seed chooses the learning rate, never enters a comparison); not in the key
    sweep: bool = False
    # stop once the validation metric passes this value (chance beyond --stop-above-chance's
    # margin); keyed only when set, so ordinary runs keep their keys
    stop_at: float | None = None
    # train and evaluate the model compiled with torch.compile (--compile); keyed only when on
    compile: bool = False

    @property
    def spec_name(self) -> str:
        """The track's model this run trains (an A/A copy trains its original)."""
        return self.model.removesuffix(AA_SUFFIX)

    @property
    def init_seed(self) -> int:
        """The seed the model is initialised from: the run's seed, or another one for an A/A
        copy."""
        return self.seed + AA_INIT_OFFSET if self.model.endswith(AA_SUFFIX) else self.seed

    @property
    def config(self) -> dict:
        config = dict(
            {name: getattr(self.budget, name) for name in _RUN_SHAPING},
            **{STORED_KWARGS_KEY: self.model_kwargs},
            device=self.device,
        )
        # float32 runs keep the keys they had before mixed precision existed
        if self.precision != "fp32":
            config["precision"] = self.precision
        if self.settings:  # the track's own values keep the keys they had before settings existed
            config["settings"] = dict(sorted(self.settings.items()))
        if self.stop_at is not None:  # a run that stops early computes other numbers
            config["stop_at"] = self.stop_at
        if self.compile:  # compiled kernels round differently: other numbers, another run
            config["compile"] = True
        return dict(config, data=self.data) if self.data else config

    @property
    def key(self) -> str:
        return run_key(**self._identity())

    def _identity(self) -> dict:
        """What names this run: the fields of its key (and of its ledger row)."""
        return pick(self, "track", "model", "grid", "lr", "seed", "config")

    @property
    def label(self) -> str:
        """``vit lr=0.001 sweep seed 1000`` or ``vit lr=0.001 seed 0``: the run as logs and progress
        bars name it."""
        return f"{self.model} lr={self.lr:g} {'sweep seed' if self.sweep else 'seed'} {self.seed}"

    def row(self, result: RunResult, *, threads: int, versions: dict) -> RunRow:
        """This run's ledger row once trained: ``result``'s status, metrics and curves, run on
        ``threads`` threads."""
        return RunRow(
            key=self.key,
            **self._identity(),
            **dataclasses.asdict(result),  # every field of the result, under its own name
            threads=threads,
            device=self.device,
            versions=versions,
        )

    def failed_row(self, error: str, *, versions: dict, threads: int | None = None) -> RunRow:
        """This run's row when it never trained (its data or plugin failed, its worker died), saying
        why.

        ``threads`` defaults to the task's own count (a driver recording a lost worker's task).
        """
        return RunRow(
            key=self.key,
            **self._identity(),
            status="failed",
            val_metric=None,
            test_metric=None,
            train_loss=[],
            val_curve=[],
            epochs_done=0,
            wall_s=0.0,
            threads=self.threads if threads is None else threads,
            device=self.device,
            versions=versions,
            error=error,
            extras={},
        )


@dataclass(frozen=True)
class Study:
    track: str
    grid: str
    models: tuple[str, ...]
    idea: str
    matched_baseline: str
    metric_name: str
    direction: str  # "lower" or "higher" is better
    budget: Budget
    device: str
    threads: int
    # per model name: keyword overrides of its builder
    model_kwargs: dict = field(default_factory=dict)
    precision: str = "fp32"  # "bf16" / "fp16": mixed precision (gridmix.study.precision)
    # gridmix.study.fingerprint.data_fingerprint of the study's data
    data: dict = field(default_factory=dict)
    # per model name: idea / baseline / ablation / control
    roles: dict = field(default_factory=dict)
    chance: float | None = None  # the track's metric floor (Track.chance), for the report's flags
    ceiling: float | None = None  # the track's metric ceiling (Track.ceiling)
    underpowered: bool = (
        False  # run although the primary comparison cannot reach alpha (the report says so)
    )
    fixed_split: bool = False  # Track.fixed_split: the inference is conditional on this one dataset
    first_seed: int = (
        0  # comparison seeds are first_seed … first_seed + seeds − 1 (another replicate: move it)
    )
    # what the study leaves out and why (an idea mixer without ablation), for the report
    notes: tuple[str, ...] = ()
    # the track's setting values off their defaults (Track.settings)
    settings: dict = field(default_factory=dict)
    # other grids every final run's trained model is tested on (transfer)
    eval_grids: tuple[str, ...] = ()
    # budget fields the command line changed (--epochs, …), by name
    overrides: dict = field(default_factory=dict)
    min_effect: str | None = (
        None  # the practical threshold (gridmix.analysis.verdicts.MinEffect; None: its default)
    )
    # the leak check's record (leak_check.check_causality); {}: none ran
    causality: dict = field(default_factory=dict)
    # stop every run once its validation metric is beyond chance by this margin (a learnability
    # check); None: runs train for the whole budget
    stop_above_chance: float | None = None
    compile: bool = False  # every run's model compiled with torch.compile (--compile)

    def __post_init__(self) -> None:
        if self.idea not in self.models and not self.budget.exploratory:
            raise ValueError(
                f"the idea {self.idea!r} is not among the study's models {list(self.models)}; "
                "expected it there, or an exploratory budget (smoke) for a study without it"
            )
        if self.stop_above_chance is not None and (
            self.chance is None
            or isinstance(self.stop_above_chance, bool)
            or not isinstance(self.stop_above_chance, (int, float))
            or not 0 < self.stop_above_chance < float("inf")
        ):
            raise ValueError(
                f"stop_above_chance {self.stop_above_chance!r} with chance {self.chance!r}; "
                "expected a positive finite margin and a chance level"
            )
        if not isinstance(self.compile, bool):
            raise ValueError(f"compile {self.compile!r}; expected True or False")
        unknown = {role for role in self.roles.values()} - set(ROLES)
        if unknown:
            raise ValueError(
                f"study roles {sorted(unknown)} are unknown; expected some of {list(ROLES)}"
            )
        shared = set(self.comparison_seeds) & set(self.sweep_seeds)
        if self.first_seed < 0 or shared:
            seeds = f"{self.comparison_seeds[0]}…{self.comparison_seeds[-1]}"
            raise ValueError(
                f"first_seed={self.first_seed} gives comparison seeds {seeds}; expected >= 0 and "
                f"none of the sweep seeds {self.sweep_seeds}"
            )

    @property
    def paired(self) -> bool:
        """Whether the study trains the idea, so that it has paired comparisons to report."""
        return self.idea in self.models

    @property
    def stop_at(self) -> float | None:
        """The validation metric at which a run stops: chance moved by ``stop_above_chance``
        towards better (down for a ``"lower"`` metric); ``None`` without a margin."""
        if self.stop_above_chance is None:
            return None
        sign = -1 if self.direction == "lower" else 1
        return self.chance + sign * self.stop_above_chance

    def role(self, model: str) -> str:
        """The model's role in this study (ledgers from before roles: the idea, else a baseline)."""
        return self.roles.get(model) or ("idea" if model == self.idea else "baseline")

    @property
    def comparison_seeds(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.budget.seeds))

    @property
    def sweep_seeds(self) -> list[int]:
        """Seeds that choose the learning rate; none when there is a single rate to choose from."""
        if len(self.budget.lrs) == 1:
            return []
        return [SWEEP_SEED_OFFSET + i for i in range(self.budget.sweep_seeds)]

    def to_dict(self) -> dict:
        data = {
            STORED_KWARGS_KEY if name == "model_kwargs" else name: value
            for name, value in dataclasses.asdict(self).items()
        }
        # specs of studies without them stay as they were
        for name in ("notes", "settings", "eval_grids", "overrides", "causality"):
            if not data[name]:
                del data[name]
        if data["stop_above_chance"] is None:
            del data["stop_above_chance"]
        if not data["compile"]:
            del data["compile"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Study:
        data = dict(data)
        data["model_kwargs"] = data.pop(STORED_KWARGS_KEY, {})
        budget = dict(data.pop("budget"))
        budget["lrs"] = tuple(budget["lrs"])
        return cls(
            **{
                **data,
                "models": tuple(data["models"]),
                "budget": Budget(**budget),
                "notes": tuple(data.get("notes", ())),
                "eval_grids": tuple(data.get("eval_grids", ())),
            }
        )

    def task(
        self, model: str, lr: float, seed: int, *, eval_grids: tuple[str, ...] = ()
    ) -> RunTask:
        return RunTask(
            track=self.track,
            model=model,
            grid=self.grid,
            lr=lr,
            seed=seed,
            budget=self.budget,
            device=self.device,
            threads=self.threads,
            model_kwargs=self.model_kwargs.get(model, {}),
            precision=self.precision,
            data=self.data.get("hash", ""),
            role=self.role(model),
            settings=self.settings,
            eval_grids=eval_grids,
            sweep=seed in self.sweep_seeds,
            stop_at=self.stop_at,
            compile=self.compile,
        )

    def sweep_tasks(self) -> list[RunTask]:
        return [
            self.task(model, lr, seed)
            for model in self.models
            for lr in self.budget.lrs
            for seed in self.sweep_seeds
        ]

    def final_tasks(self, chosen: dict[str, float | None]) -> list[RunTask]:
        """The comparison seeds' runs at each model's chosen rate, each also tested on the study's
        ``eval_grids``."""
        return [
            self.task(model, chosen[model], seed, eval_grids=self.eval_grids)
            for model in self.models
            if chosen[model] is not None
            for seed in self.comparison_seeds
        ]


def aa_study(study: Study) -> Study:
    """The A/A version of ``study``: its matched baseline against a copy of itself (independent
    init)."""
    baseline = study.matched_baseline
    copy = baseline + AA_SUFFIX
    return dataclasses.replace(
        study,
        models=(copy, baseline),
        idea=copy,
        roles={copy: "idea", baseline: "baseline"},
        model_kwargs={name: study.model_kwargs.get(baseline, {}) for name in (copy, baseline)},
    )


def choose_learning_rates(
    study: Study, rows: dict[str, RunRow]
) -> tuple[dict[str, float | None], dict]:
    """Per model, the swept rate with the best mean validation metric over the sweep seeds.

    A rate is eligible only if every sweep seed finished ``ok`` there. Returns the choices (``None``
    when no rate is eligible) and, per model, the sweep table for the report. A single rate is
    chosen without a sweep (its table is empty).
    """
    if not study.sweep_seeds:
        return {model: study.budget.lrs[0] for model in study.models}, {
            model: [] for model in study.models
        }
    lower = study.direction == "lower"
    chosen, tables = {}, {}
    for model in study.models:
        table = []
        for lr in study.budget.lrs:
            found = [rows.get(study.task(model, lr, seed).key) for seed in study.sweep_seeds]
            ok = all(row is not None and row.status == "ok" for row in found)
            vals = [row.val_metric for row in found if row is not None and row.status == "ok"]
            table.append(
                dict(
                    cfg={"lr": lr},
                    mean=float(np.mean(vals)) if ok else None,
                    per_seed=[row.val_metric if row else None for row in found],
                    statuses=[row.status if row else "missing" for row in found],
                    eligible=ok,
                )
            )
        eligible = [entry for entry in table if entry["eligible"]]
        best = (
            (min if lower else max)(eligible, key=lambda entry: entry["mean"]) if eligible else None
        )
        chosen[model] = best["cfg"]["lr"] if best else None
        tables[model] = table
    return chosen, tables


def seed_span(seeds: list[int]) -> str:
    """``seeds 1000–1001``, ``seed 1000`` or ``seeds 0, 2, 5``: a study's seeds as a log line names
    them."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}–{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds))


@dataclass(frozen=True)
class Phase:
    """One phase of a study as it starts: ``name`` ("sweep" or "comparison"), what it is for, how
    many runs it has and how many of them are not yet in the ledger. ``str(phase)``: "sweep
    (choosing the learning rate on seeds 1000–1001): 16 runs"."""

    name: str
    purpose: str
    runs: int
    pending: int

    def __str__(self) -> str:
        left = f", {self.pending} left to train" if 0 < self.pending < self.runs else ""
        done = ", all already in the ledger" if self.runs and not self.pending else ""
        return (
            f"{self.name} ({self.purpose}): {self.runs} "
            f"run{'s' if self.runs != 1 else ''}{left}{done}"
        )


def sweep_phase_purpose(study: Study) -> str:
    return f"choosing the learning rate on {seed_span(study.sweep_seeds)}"


def comparison_phase_purpose(study: Study) -> str:
    rates = "the chosen rates" if study.sweep_seeds else f"the one rate {study.budget.lrs[0]:g}"
    return f"{seed_span(study.comparison_seeds)} at {rates}"


def study_progress(study: Study, rows: dict[str, RunRow]) -> dict[str, dict[str, int]]:
    """Per phase (``sweep``, ``comparison``), the runs planned and how many the ledger holds by
    status (``ok``, ``diverged``, ``failed``) or lacks (``missing``). The comparison's runs are
    known once the sweep chose the rates; until then they are counted as ``models × seeds``, all
    missing."""

    def count(tasks: list[RunTask]) -> dict[str, int]:
        found = [rows.get(task.key) for task in tasks]
        counts = {
            status: sum(1 for row in found if row is not None and row.status == status)
            for status in ("ok", "diverged", "failed")
        }
        return dict(planned=len(tasks), **counts, missing=sum(1 for row in found if row is None))

    sweep = count(study.sweep_tasks())
    if sweep["missing"] or sweep["failed"]:  # rates not chosen yet (failed sweep runs are retried)
        comparison = dict(
            planned=len(study.models) * study.budget.seeds,
            ok=0,
            diverged=0,
            failed=0,
            missing=len(study.models) * study.budget.seeds,
        )
    else:
        comparison = count(study.final_tasks(choose_learning_rates(study, rows)[0]))
    return {"sweep": sweep, "comparison": comparison}


def pending_models(study: Study, rows: dict[str, RunRow]) -> list[str]:
    """The model of every run the study still has to train (one entry per run): sweep runs the
    ledger lacks (or holds failed, as they are retried), then the comparison's: those the ledger
    lacks for a model whose sweep is done (its rate is chosen, per model), and one per seed for a
    model still sweeping (what :func:`study_progress` counts as missing or failed)."""

    def lacking(tasks: list[RunTask]) -> list[str]:
        return [
            task.model
            for task in tasks
            if rows.get(task.key) is None or rows[task.key].status == "failed"
        ]

    sweep = lacking(study.sweep_tasks())
    sweeping = set(sweep)  # their rates, and so their comparison runs' keys, are not known yet
    chosen = choose_learning_rates(study, rows)[0]
    known = {model: None if model in sweeping else lr for model, lr in chosen.items()}
    unknown = [model for model in study.models if model in sweeping for _ in study.comparison_seeds]
    return sweep + unknown + lacking(study.final_tasks(known))
