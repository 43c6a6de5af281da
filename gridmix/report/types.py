"""The study report as objects: :class:`Report`, its :class:`Arm` s, :class:`Comparison` s,
:class:`Power` and, with ``--eval-grids``, its :class:`Transfer` to other grids.

:func:`gridmix.report.build_report` makes a :class:`Report`; the renderers (``report.md``, the
plots, the terminal table, the naive references' lines) read its fields; JSON exists only at the
edge: :meth:`Report.to_dict` writes ``bench_report.json`` with the keys the report always had (the
reference report's, docs/analysis.md), and :meth:`Report.from_dict` reads one back. Every class
checks itself when built.

Analyses measured by other modules (parity, scaling, the mechanism signature, the naive references,
the timings, the budget, the data fingerprint) stay the JSON-ready dicts those modules make.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gridmix.analysis.verdicts import FAMILIES, FLAGS, VERDICT_NOT_COMPARED, a_better
from gridmix.core.defaults import DEFAULT_MIN_EFFECT
from gridmix.study.transfer import TRANSFER_MISSING, TRANSFER_STATUSES
from gridmix.tracks import ROLES

if TYPE_CHECKING:
    from gridmix.analysis.verdicts import PairedComparison

MECHANISM_NAMES = ("ablation", "idea_vs_control", "baseline_vs_control")


@dataclass(frozen=True)
class SweepPoint:
    """One learning rate of an arm's sweep: the mean validation metric over the sweep seeds, when
    all finished."""

    lr: float
    mean: float | None
    per_seed: tuple[float | None, ...]
    statuses: tuple[str, ...]
    eligible: bool  # every sweep seed finished "ok" at this rate

    def __post_init__(self) -> None:
        if len(self.per_seed) != len(self.statuses):
            raise ValueError(
                f"sweep point lr={self.lr:g}: {len(self.per_seed)} values but {len(self.statuses)} "
                "statuses; expected one of each per sweep seed"
            )
        if self.eligible != (self.mean is not None):
            raise ValueError(
                f"sweep point lr={self.lr:g}: eligible={self.eligible} with mean={self.mean}; "
                "expected a mean exactly when every sweep seed finished"
            )

    def to_dict(self) -> dict:
        return dict(
            cfg={"lr": self.lr},
            mean=self.mean,
            per_seed=list(self.per_seed),
            statuses=list(self.statuses),
            eligible=self.eligible,
        )

    @classmethod
    def from_dict(cls, data: Mapping) -> SweepPoint:
        return cls(
            lr=data["cfg"]["lr"],
            mean=data["mean"],
            per_seed=tuple(data["per_seed"]),
            statuses=tuple(data["statuses"]),
            eligible=data["eligible"],
        )


@dataclass(frozen=True)
class Comparison:
    """``a − b`` per comparison seed, tested within its ``family``; ``result`` is None when it was
    not compared (then ``reason`` says why). ``verdict`` names arm ``a`` (the idea, or the baseline
    in a mechanism question), or says why there is no verdict ("cannot reach α", "uninformative:
    ...", "not compared"); the test's ``result.verdict`` is the same (the report's, where the
    family's floor or the arms' flags overrule the p)."""

    a: str
    b: str
    family: str
    verdict: str
    result: PairedComparison | None = None
    holm_over: int | None = (
        None  # how many comparisons the Holm adjustment ran over (1: alone at α)
    )
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(
                f"comparison {self.a} − {self.b}: family {self.family!r}; expected one of "
                f"{FAMILIES}"
            )
        if (self.result is None) == (self.reason is None):
            raise ValueError(
                f"comparison {self.a} − {self.b}: expected either a result or a reason it was not "
                f"compared, got result={self.result is not None}, reason={self.reason!r}"
            )
        if self.result is not None and self.result.verdict != self.verdict:
            raise ValueError(
                f"comparison {self.a} − {self.b}: verdict {self.verdict!r} but its test says "
                f"{self.result.verdict!r}; expected the same"
            )
        if (self.result is None) != (self.holm_over is None):
            raise ValueError(
                f"comparison {self.a} − {self.b}: holm_over={self.holm_over}; expected a count "
                "exactly when compared"
            )

    @property
    def a_better(self) -> bool | None:
        """True when ``a`` is significantly better, False when significantly worse, None without a
        verdict (or with a significant but negligible one)."""
        return a_better(self.verdict)

    def to_dict(self) -> dict:
        if self.result is None:
            return dict(
                verdict=self.verdict, a=self.a, b=self.b, family=self.family, reason=self.reason
            )
        return dict(
            self.result.to_dict(), a=self.a, b=self.b, family=self.family, holm_over=self.holm_over
        )

    @classmethod
    def from_dict(cls, data: Mapping) -> Comparison:
        from gridmix.analysis.verdicts import PairedComparison

        common = dict(a=data["a"], b=data["b"], family=data["family"], verdict=data["verdict"])
        if "reason" in data:
            return cls(**common, reason=data["reason"])
        # those with a default came later: absent from older reports
        fields = PairedComparison.__dataclass_fields__
        return cls(
            **common,
            holm_over=data["holm_over"],
            result=PairedComparison(
                **{
                    name: data[name]
                    for name, f in fields.items()
                    if name in data or f.default is MISSING
                }
            ),
        )


@dataclass(frozen=True)
class Arm:
    """One model of the study: its chosen learning rate, its sweep, and its test metric per
    comparison seed.

    ``per_seed_status``, ``train_loss`` and ``val`` have one entry per comparison seed ("missing"
    and empty curves where no run finished); ``per_seed`` holds the test metric of the seeds that
    finished "ok", in order; ``comparison`` is the idea's comparison with this arm when the arm is a
    baseline; ``constant_seeds`` the comparison seeds on which its test predictions were one
    constant (one class for every sample).
    """

    name: str
    role: str
    lr: float | None  # None: no learning rate had every sweep seed finish
    sweep: tuple[SweepPoint, ...]
    per_seed_status: tuple[str, ...]
    train_loss: tuple[tuple[float, ...], ...]
    val: tuple[tuple[float, ...], ...]
    per_seed: tuple[float, ...]
    mean: float | None
    std: float | None
    flag: str | None = None
    comparison: Comparison | None = None
    constant_seeds: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"arm {self.name!r}: role {self.role!r}; expected one of {ROLES}")
        seeds = len(self.per_seed_status)
        if len(self.train_loss) != seeds or len(self.val) != seeds:
            raise ValueError(
                f"arm {self.name!r}: {len(self.train_loss)} training and {len(self.val)} "
                f"validation curves for {seeds} seeds; expected one of each per seed"
            )
        finished = self.per_seed_status.count("ok")
        if len(self.per_seed) != finished:
            raise ValueError(
                f"arm {self.name!r}: {len(self.per_seed)} test values for {finished} finished "
                "seeds; expected one per seed that finished"
            )
        if (self.mean is None) != (finished == 0) or (self.std is None) != (finished == 0):
            raise ValueError(
                f"arm {self.name!r}: mean={self.mean}, std={self.std} with {finished} finished "
                "seeds; expected both exactly when a seed finished"
            )
        if self.flag not in (None, *FLAGS):
            raise ValueError(
                f"arm {self.name!r}: flag {self.flag!r}; expected None or one of {FLAGS}"
            )

    @property
    def n(self) -> int:
        return len(self.per_seed)

    @property
    def by_seed(self) -> dict[int, float]:
        """The test metric by comparison-seed index, for the seeds that finished."""
        values = iter(self.per_seed)
        return {
            index: next(values)
            for index, status in enumerate(self.per_seed_status)
            if status == "ok"
        }

    def summary(self) -> dict:
        """The test metric over the comparison seeds: the JSON's ``full`` (and the idea's top-level
        keys)."""
        return dict(mean=self.mean, std=self.std, per_seed=list(self.per_seed), n=self.n)

    def to_dict(self) -> dict:
        arm = dict(
            name=self.name,
            role=self.role,
            best_cfg={"lr": self.lr},
            sweep=[p.to_dict() for p in self.sweep],
            per_seed_status=list(self.per_seed_status),
            curves=dict(
                train_loss=[list(c) for c in self.train_loss], val=[list(c) for c in self.val]
            ),
            full=self.summary(),
            flag=self.flag,
            constant_prediction_seeds=list(self.constant_seeds),
        )
        if self.comparison is not None:
            arm["comparison"] = self.comparison.to_dict()
        return arm

    @classmethod
    def from_dict(cls, data: Mapping) -> Arm:
        full = data["full"]
        if full["n"] != len(full["per_seed"]):
            raise ValueError(
                f"arm {data['name']!r}: n={full['n']} with {len(full['per_seed'])} values; "
                "expected one value per finished seed"
            )
        comparison = data.get("comparison")
        return cls(
            name=data["name"],
            role=data["role"],
            lr=data["best_cfg"]["lr"],
            sweep=tuple(SweepPoint.from_dict(p) for p in data["sweep"]),
            per_seed_status=tuple(data["per_seed_status"]),
            train_loss=tuple(tuple(c) for c in data["curves"]["train_loss"]),
            val=tuple(tuple(c) for c in data["curves"]["val"]),
            per_seed=tuple(full["per_seed"]),
            mean=full["mean"],
            std=full["std"],
            flag=data["flag"],
            comparison=None if comparison is None else Comparison.from_dict(comparison),
            constant_seeds=tuple(data.get("constant_prediction_seeds", ())),
        )


@dataclass(frozen=True)
class PrimaryPower:
    """Whether the primary comparison, alone at α, can reach α with the study's seeds (before any
    training)."""

    min_p: float
    seeds_needed: int
    reachable: bool


@dataclass(frozen=True)
class SecondaryPower:
    """Whether the secondary family (Holm over ``comparisons``) can reach α with the study's
    seeds."""

    comparisons: int
    min_p_holm: float
    seeds_needed: int
    reachable: bool


@dataclass(frozen=True)
class Power:
    """Can the seeds reach α: the primary comparison, and the secondary family when there is one."""

    alpha: float
    n_seeds: int
    primary: PrimaryPower
    underpowered_run: bool  # the study ran although the primary comparison cannot reach α
    secondary: SecondaryPower | None = None

    def __post_init__(self) -> None:
        checks = [("primary", self.primary.min_p, self.primary.reachable)]
        if self.secondary is not None:
            checks.append(("secondary", self.secondary.min_p_holm, self.secondary.reachable))
        for name, min_p, reachable in checks:
            if reachable != (min_p < self.alpha):
                raise ValueError(
                    f"power: {name} reachable={reachable} with smallest p {min_p:.4g} at α = "
                    f"{self.alpha:g}; expected reachable exactly when that p is below α"
                )

    def to_dict(self) -> dict:
        """The fields, the secondary family's left out when there is none."""
        power = asdict(self)
        if self.secondary is None:
            del power["secondary"]
        return power

    @classmethod
    def from_dict(cls, data: Mapping) -> Power:
        secondary = data.get("secondary")
        return cls(
            alpha=data["alpha"],
            n_seeds=data["n_seeds"],
            primary=PrimaryPower(**data["primary"]),
            underpowered_run=data["underpowered_run"],
            secondary=None if secondary is None else SecondaryPower(**secondary),
        )


@dataclass(frozen=True)
class FailedRun:
    """A run of the study that did not finish "ok" (failed or diverged), and its one-line error."""

    model: str
    lr: float
    seed: int
    status: str
    error: str

    def __post_init__(self) -> None:
        if self.status == "ok":
            raise ValueError(
                f"failed run {self.model} lr={self.lr:g} seed={self.seed}: status 'ok'; expected "
                "a run that did not finish"
            )

    def to_dict(self) -> dict:
        return dict(
            model=self.model, lr=self.lr, seed=self.seed, status=self.status, error=self.error
        )


@dataclass(frozen=True)
class TransferArm:
    """One model tested at one evaluation grid: per comparison seed its status (one of
    :data:`TRANSFER_STATUSES`, or :data:`TRANSFER_MISSING`), the test metric of the seeds that ran
    (``per_seed``, in seed order), their mean and std (ddof=0), how the model moved there
    (``adapted``) and, for the seeds that did not run, why (distinct reasons, in order)."""

    name: str
    statuses: tuple[str, ...]
    per_seed: tuple[float, ...]
    mean: float | None
    std: float | None
    adapted: str = ""
    reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if any(status not in (*TRANSFER_STATUSES, TRANSFER_MISSING) for status in self.statuses):
            raise ValueError(
                f"transfer arm {self.name!r}: statuses {self.statuses}; expected some of "
                f"{(*TRANSFER_STATUSES, TRANSFER_MISSING)}"
            )
        ran = self.statuses.count("ok")
        if (
            len(self.per_seed) != ran
            or (self.mean is None) != (ran == 0)
            or (self.std is None) != (ran == 0)
        ):
            raise ValueError(
                f"transfer arm {self.name!r}: {len(self.per_seed)} values, mean {self.mean}, std "
                f"{self.std} with {ran} seeds that ran; expected one value per such seed and both "
                "exactly when one ran"
            )

    @property
    def by_seed(self) -> dict[int, float]:
        """The test metric by comparison-seed index, for the seeds that ran."""
        values = iter(self.per_seed)
        return {index: next(values) for index, status in enumerate(self.statuses) if status == "ok"}

    def to_dict(self) -> dict:
        return dict(
            name=self.name,
            statuses=list(self.statuses),
            per_seed=list(self.per_seed),
            mean=self.mean,
            std=self.std,
            n=len(self.per_seed),
            adapted=self.adapted,
            reasons=list(self.reasons),
        )

    @classmethod
    def from_dict(cls, data: Mapping) -> TransferArm:
        return cls(
            name=data["name"],
            statuses=tuple(data["statuses"]),
            per_seed=tuple(data["per_seed"]),
            mean=data["mean"],
            std=data["std"],
            adapted=data["adapted"],
            reasons=tuple(data["reasons"]),
        )


@dataclass(frozen=True)
class TransferGrid:
    """Every model tested at one evaluation grid, and the idea − matched baseline comparison there
    (family ``"transfer"``, alone at α, secondary to the headline); ``comparison`` is None without a
    baseline."""

    grid: str
    arms: Mapping[str, TransferArm]
    comparison: Comparison | None

    def __post_init__(self) -> None:
        for name, arm in self.arms.items():
            if arm.name != name:
                raise ValueError(
                    f"transfer grid {self.grid}: arm {name!r} is named {arm.name!r}; expected its "
                    "key"
                )
        if self.comparison is not None and (
            self.comparison.family != "transfer"
            or {self.comparison.a, self.comparison.b} - set(self.arms)
        ):
            raise ValueError(
                f"transfer grid {self.grid}: comparison {self.comparison.a} − {self.comparison.b} "
                "of "
                f"family {self.comparison.family!r}; expected the transfer family between its arms"
            )

    def to_dict(self) -> dict:
        return dict(
            grid=self.grid,
            arms={name: arm.to_dict() for name, arm in self.arms.items()},
            comparison=None if self.comparison is None else self.comparison.to_dict(),
        )

    @classmethod
    def from_dict(cls, data: Mapping) -> TransferGrid:
        comparison = data["comparison"]
        return cls(
            grid=data["grid"],
            arms={name: TransferArm.from_dict(a) for name, a in data["arms"].items()},
            comparison=None if comparison is None else Comparison.from_dict(comparison),
        )


@dataclass(frozen=True)
class Transfer:
    """The study's models, trained on ``trained_grid``, tested on each of its evaluation ``grids``
    (in the order asked)."""

    trained_grid: str
    grids: tuple[TransferGrid, ...]

    def __post_init__(self) -> None:
        names = [point.grid for point in self.grids]
        if not names or len(set(names)) != len(names) or self.trained_grid in names:
            raise ValueError(
                f"transfer from {self.trained_grid} to {names}; expected distinct grids other than "
                "the training grid, at least one"
            )

    def to_dict(self) -> dict:
        return dict(trained_grid=self.trained_grid, grids=[point.to_dict() for point in self.grids])

    @classmethod
    def from_dict(cls, data: Mapping) -> Transfer:
        return cls(
            trained_grid=data["trained_grid"],
            grids=tuple(TransferGrid.from_dict(g) for g in data["grids"]),
        )


# the JSON's primary comparison without one
NOT_COMPARED = dict(verdict=VERDICT_NOT_COMPARED, reason="no baseline")
_KEYS = (
    "bench_version",
    "track",
    "grid",
    "model",
    "metric",
    "metric_direction",
    "n_seeds",
    "seeds",
    "fixed_split",
    "chance",
    "ceiling",
    "baseline",
    "idea",
    "baselines",
    "primary_baseline",
    "comparison",
    "comparisons",
    "holm_adjusted_over",
    "power",
    "mechanism",
    "mechanism_signature",
    "budget",
    "failures",
    "timings",
    "versions",
    "device",
    "precision",
    "threads",
    "data",
    "code",
    "references",
    "reference_comparisons",
    "min_effect",
    "plot_errors",
    "notes",
    "transfer",
    "causality",
    "compiled",
)


@dataclass(frozen=True)
class Report:
    """One study's report: its arms (the idea first, then the others in the study's order), the
    primary and secondary comparisons, the mechanism questions, the power check, and what the run
    measured beside them.

    ``analyses`` holds the analyses the run stored (``parity``, ``scaling``), each as its module's
    dict or ``{"error": ...}``; ``plot_errors`` the plots that could not be drawn.
    ``reference_comparisons`` holds, per arm, its comparison (arm − reference, family
    ``"reference"``) with the best reference; ``min_effect`` the practical threshold the verdicts
    used (:class:`gridmix.analysis.verdicts.MinEffect`'s spelling).
    """

    bench_version: int
    track: str
    grid: str
    idea: str
    metric: str
    direction: str  # "lower" or "higher" is better
    comparison_seeds: tuple[int, ...]
    sweep_seeds: tuple[int, ...]
    fixed_split: bool
    chance: float | None
    ceiling: float | None
    arms: Mapping[str, Arm]
    primary_baseline: str | None
    comparisons: Mapping[str, Comparison]
    holm_adjusted_over: tuple[str, ...]
    power: Power
    mechanism: Mapping[str, Comparison]
    mechanism_signature: dict | None
    budget: dict
    failures: tuple[FailedRun, ...]
    timings: dict
    versions: dict
    device: str
    precision: str
    threads: int
    data: dict | None
    code: dict
    analyses: dict = field(default_factory=dict)
    references: dict | None = None
    reference_comparisons: Mapping[str, Comparison] = field(default_factory=dict)
    min_effect: str = DEFAULT_MIN_EFFECT
    plot_errors: tuple[str, ...] = ()
    # what the study left out and why (an idea mixer without an ablation, say)
    notes: tuple[str, ...] = ()
    transfer: Transfer | None = (
        None  # the models tested on other grids (--eval-grids), secondary to the headline
    )
    causality: dict | None = (
        None  # the leak check's record (orchestrate.leak_check.check_causality); None: none ran
    )
    # --compile: the backend and, per model that trained eager because compiling failed, how many
    # runs and the first error (``{"backend": ..., "eager_fallback": {model: {...}}}``); None: eager
    compiled: dict | None = None

    def __post_init__(self) -> None:
        if self.direction not in ("lower", "higher"):
            raise ValueError(
                f"report direction {self.direction!r}; expected 'lower' or 'higher' (is better)"
            )
        if next(iter(self.arms), None) != self.idea:
            raise ValueError(
                f"report arms {list(self.arms)}; expected the idea {self.idea!r} first"
            )
        if self.primary_baseline is not None and self.primary_baseline not in self.arms:
            raise ValueError(
                f"primary baseline {self.primary_baseline!r} is not among the arms "
                f"{list(self.arms)}"
            )
        for name, arm in self.arms.items():
            if arm.name != name or arm.comparison != self.comparisons.get(name):
                raise ValueError(
                    f"arm {name!r} (named {arm.name!r}) does not carry its comparison in the "
                    f"report; expected the arm named by its key, with comparisons[{name!r}] or none"
                )
        for name, comparison in {**self.comparisons, **self.mechanism}.items():
            unknown = {comparison.a, comparison.b} - set(self.arms)
            if unknown:
                raise ValueError(
                    f"comparison {name!r} names arms {sorted(unknown)} the report does not have; "
                    f"expected some of {list(self.arms)}"
                )
        unknown = set(self.mechanism) - set(MECHANISM_NAMES) | set(self.holm_adjusted_over) - set(
            self.comparisons
        )
        if unknown:
            raise ValueError(
                f"report names {sorted(unknown)} among its mechanism questions or its Holm family; "
                f"expected some of {list(MECHANISM_NAMES)} and of {list(self.comparisons)}"
            )
        for name, comparison in self.reference_comparisons.items():
            reference_names = set((self.references or {}).get("values") or {})
            if comparison.a != name or name not in self.arms or comparison.b not in reference_names:
                raise ValueError(
                    f"reference comparison {name!r} is {comparison.a} − {comparison.b}; expected "
                    "an arm "
                    f"of {list(self.arms)} against one of the references {sorted(reference_names)}"
                )
        if self.power.n_seeds != len(self.comparison_seeds):
            raise ValueError(
                f"power is for {self.power.n_seeds} seeds but the report compares "
                f"{len(self.comparison_seeds)}; expected the same"
            )
        if self.transfer is not None and (
            self.transfer.trained_grid != self.grid
            or any(set(point.arms) - set(self.arms) for point in self.transfer.grids)
        ):
            raise ValueError(
                f"transfer from {self.transfer.trained_grid} of arms the report may not have; "
                f"expected transfer from its grid {self.grid} of some of its arms {list(self.arms)}"
            )

    @property
    def idea_arm(self) -> Arm:
        return self.arms[self.idea]

    @property
    def others(self) -> dict[str, Arm]:
        """Every arm but the idea (baselines, ablation, control), in the study's order."""
        return {name: arm for name, arm in self.arms.items() if name != self.idea}

    @property
    def baseline(self) -> Arm | None:
        """The matched baseline's arm (the primary comparison's), if the study had a baseline."""
        return None if self.primary_baseline is None else self.arms[self.primary_baseline]

    @property
    def comparison(self) -> Comparison | None:
        """The primary comparison, idea − matched baseline; None without a baseline."""
        return None if self.primary_baseline is None else self.comparisons[self.primary_baseline]

    def comparison_with(self, name: str) -> Comparison | None:
        """The idea's comparison with arm ``name``: a baseline's own, else the mechanism question
        idea − it."""
        arm = self.arms[name]
        if arm.comparison is not None:
            return arm.comparison
        return next((c for c in self.mechanism.values() if c.a == self.idea and c.b == name), None)

    @property
    def verdict(self) -> str:
        return NOT_COMPARED["verdict"] if self.comparison is None else self.comparison.verdict

    @property
    def n_seeds(self) -> int:
        return len(self.comparison_seeds)

    @property
    def metric_direction(self) -> str:
        return f"{self.direction} is better"

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower"

    def with_plot_errors(self, errors: list[str]) -> Report:
        return replace(self, plot_errors=tuple(errors))

    def to_dict(self) -> dict[str, Any]:
        """``bench_report.json``: the keys and values of every report gridmix wrote
        (docs/analysis.md)."""
        arms = {name: arm.to_dict() for name, arm in self.arms.items()}
        report = dict(
            bench_version=self.bench_version,
            track=self.track,
            grid=self.grid,
            model=self.idea,
            metric=self.metric,
            metric_direction=self.metric_direction,
            n_seeds=self.n_seeds,
            seeds=dict(comparison=list(self.comparison_seeds), sweep=list(self.sweep_seeds)),
            fixed_split=self.fixed_split,
            chance=self.chance,
            ceiling=self.ceiling,
            baseline=None if self.primary_baseline is None else arms[self.primary_baseline],
            idea=dict(arms[self.idea], **self.idea_arm.summary()),
            baselines={name: arm for name, arm in arms.items() if name != self.idea},
            primary_baseline=self.primary_baseline,
            comparison=dict(NOT_COMPARED) if self.comparison is None else self.comparison.to_dict(),
            comparisons={name: c.to_dict() for name, c in self.comparisons.items()},
            holm_adjusted_over=list(self.holm_adjusted_over),
            power=self.power.to_dict(),
            mechanism={name: c.to_dict() for name, c in self.mechanism.items()},
            mechanism_signature=self.mechanism_signature,
            budget=self.budget,
            failures=[f.to_dict() for f in self.failures],
            timings=self.timings,
            versions=self.versions,
            device=self.device,
            precision=self.precision,
            threads=self.threads,
            data=self.data,
            code=self.code,
            **self.analyses,
            references=self.references,
            reference_comparisons={
                name: c.to_dict() for name, c in self.reference_comparisons.items()
            },
            min_effect=self.min_effect,
        )
        if self.plot_errors:
            report["plot_errors"] = list(self.plot_errors)
        if self.notes:
            report["notes"] = list(self.notes)
        if self.transfer is not None:
            report["transfer"] = self.transfer.to_dict()
        if self.causality:
            report["causality"] = self.causality
        if self.compiled is not None:
            report["compiled"] = self.compiled
        return report

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        """A report read back from ``bench_report.json``; ``ValueError`` when a key is missing or
        malformed.

        Keys added after the report took its present shape (power, mechanism, the floor/ceiling
        flags) may be missing and read as their defaults: ``fixed_split`` (False),
        ``reference_comparisons`` (none), ``min_effect`` (the default), an arm's
        ``constant_prediction_seeds`` (none) and a comparison's sign-flip interval (None).
        """
        try:
            return cls._from_dict(data)
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(
                f"not a gridmix report ({type(error).__name__}: {error}); expected the JSON "
                "`gridmix run` writes (bench_report.json)"
            ) from None

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> Report:
        comparisons = {name: Comparison.from_dict(c) for name, c in data["comparisons"].items()}
        arms = {}
        for arm_data in (data["idea"], *data["baselines"].values()):
            arm = Arm.from_dict(arm_data)
            # one object per comparison
            arms[arm.name] = replace(arm, comparison=comparisons.get(arm.name))
        metric_direction = data["metric_direction"]
        return cls(
            bench_version=data["bench_version"],
            track=data["track"],
            grid=data["grid"],
            idea=data["model"],
            metric=data["metric"],
            direction=metric_direction.removesuffix(" is better"),
            comparison_seeds=tuple(data["seeds"]["comparison"]),
            sweep_seeds=tuple(data["seeds"]["sweep"]),
            fixed_split=data.get("fixed_split", False),
            chance=data["chance"],
            ceiling=data["ceiling"],
            arms=arms,
            primary_baseline=data["primary_baseline"],
            comparisons=comparisons,
            holm_adjusted_over=tuple(data["holm_adjusted_over"]),
            power=Power.from_dict(data["power"]),
            mechanism={name: Comparison.from_dict(c) for name, c in data["mechanism"].items()},
            mechanism_signature=data["mechanism_signature"],
            budget=data["budget"],
            failures=tuple(FailedRun(**f) for f in data["failures"]),
            timings=data["timings"],
            versions=data["versions"],
            device=data["device"],
            precision=data["precision"],
            threads=data["threads"],
            data=data["data"],
            code=data["code"],
            analyses={k: v for k, v in data.items() if k not in _KEYS},
            references=data["references"],
            reference_comparisons={
                name: Comparison.from_dict(c)
                for name, c in data.get("reference_comparisons", {}).items()
            },
            min_effect=data.get("min_effect", DEFAULT_MIN_EFFECT),
            plot_errors=tuple(data.get("plot_errors", ())),
            notes=tuple(data.get("notes", ())),
            transfer=None if data.get("transfer") is None else Transfer.from_dict(data["transfer"]),
            causality=data.get("causality"),
            compiled=data.get("compiled"),
        )
