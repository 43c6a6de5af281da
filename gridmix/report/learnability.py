"""The report of a study without the idea (``gridmix run --without-idea``, an exploratory budget
only): a learnability check for a track's author. Per model it gives the learning rate chosen, every
comparison seed's test metric, how many seeds ended beyond the chance level (by the
``--stop-above-chance`` margin when one was given) and why each run stopped. There is no idea to
pair with, so there is no paired verdict, and the report says so (docs/guide.md, "Is a new track
learnable?").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from gridmix.core.files import write_atomic
from gridmix.report.format import fmt
from gridmix.study.ledger import Ledger
from gridmix.study.spec import Study, choose_learning_rates

NO_VERDICT = "no paired verdict: the study trains no idea (--without-idea), a learnability check"


@dataclass(frozen=True)
class ModelRuns:
    """One model's comparison runs: ``lr`` chosen (``None``: no rate finished the sweep), per
    comparison seed its test metric (``None``: not finished), epochs trained and why it stopped
    before the budget's last epoch (empty: it did not), and how many seeds ended beyond chance."""

    model: str
    role: str
    lr: float | None
    test: tuple[float | None, ...]
    epochs: tuple[int, ...]
    stop_reasons: tuple[str, ...]
    beyond_chance: int

    def __post_init__(self) -> None:
        if not len(self.test) == len(self.epochs) == len(self.stop_reasons):
            raise ValueError(
                f"{self.model}: {len(self.test)} test metrics, {len(self.epochs)} epoch counts "
                f"and {len(self.stop_reasons)} stop reasons; expected one of each per seed"
            )


@dataclass(frozen=True)
class Learnability:
    """A study without the idea, as ``gridmix run`` reports it: the study's identity, its chance
    level and stop margin, one :class:`ModelRuns` per model, and :data:`NO_VERDICT`."""

    track: str
    grid: str
    budget: str
    metric_name: str
    direction: str
    chance: float | None
    margin: float | None
    seeds: tuple[int, ...]
    models: tuple[ModelRuns, ...]
    verdict: str = NO_VERDICT

    def lines(self) -> list[str]:
        """One line per model: its mean test metric, the seeds beyond chance, the runs stopped."""
        beyond = "beyond chance" + (f" by {fmt(self.margin)}" if self.margin is not None else "")
        lines = []
        for runs in self.models:
            done = [value for value in runs.test if value is not None]
            mean = fmt(sum(done) / len(done)) if done else "–"
            stopped = sum(1 for reason in runs.stop_reasons if reason)
            chance = (
                f"; {runs.beyond_chance} of {len(runs.test)} seeds {beyond}"
                if self.chance is not None
                else ""
            )
            lines.append(
                f"{runs.model} ({runs.role}, lr {fmt(runs.lr)}): mean "
                f"{self.metric_name} {mean} over {len(done)} of {len(runs.test)} seeds{chance}; "
                f"{stopped} run(s) stopped on leaving chance"
            )
        return lines

    def markdown(self) -> str:
        """``report.md``: the verdict line, the chance level, the per-model lines, each seed's
        value and every stop reason."""
        chance = fmt(self.chance) if self.chance is not None else "none declared"
        margin = (
            f"; runs stopped once their validation metric was {fmt(self.margin)} beyond it "
            "(--stop-above-chance)"
            if self.margin is not None
            else ""
        )
        out = [
            f"# Learnability check: {self.track} {self.grid}, budget {self.budget}",
            "",
            f"**{self.verdict}.** Each model's results stand alone: nothing here compares models.",
            "",
            f"Chance level of {self.metric_name} ({self.direction} is better): {chance}{margin}.",
            "",
            *[f"- {line}" for line in self.lines()],
            "",
            "| model | " + " | ".join(f"seed {seed}" for seed in self.seeds) + " |",
            "|---|" + "---|" * len(self.seeds),
            *[
                f"| {runs.model} | "
                + " | ".join(
                    f"{fmt(value)} ({epochs} ep.)" if value is not None else "–"
                    for value, epochs in zip(runs.test, runs.epochs)
                )
                + " |"
                for runs in self.models
            ],
        ]
        reasons = [
            f"- {runs.model} seed {seed}: {reason}"
            for runs in self.models
            for seed, reason in zip(self.seeds, runs.stop_reasons)
            if reason
        ]
        return "\n".join(out + (["", "Runs stopped early:", *reasons] if reasons else [])) + "\n"


def learnability_report(ledger: Ledger) -> Learnability:
    """The report of the ledger's study without the idea, from its comparison runs."""
    study = Study.from_dict(ledger.study())
    rows = {row.key: row for row in ledger.rows()}
    chosen, _ = choose_learning_rates(study, rows)
    lower = study.direction == "lower"
    line = study.stop_at if study.stop_at is not None else study.chance
    models = []
    for model in study.models:
        found = [
            rows.get(study.task(model, chosen[model], seed).key) if chosen[model] else None
            for seed in study.comparison_seeds
        ]
        finished = [row if row is not None and row.status == "ok" else None for row in found]
        test = tuple(row.test_metric if row else None for row in finished)
        beyond = sum(
            1
            for value in test
            if value is not None and line is not None and (value < line if lower else value > line)
        )
        models.append(
            ModelRuns(
                model=model,
                role=study.role(model),
                lr=chosen[model],
                test=test,
                epochs=tuple(row.epochs_done if row else 0 for row in finished),
                stop_reasons=tuple(
                    row.extras.get("training", {}).get("stop_reason", "") if row else ""
                    for row in finished
                ),
                beyond_chance=beyond,
            )
        )
    return Learnability(
        track=study.track,
        grid=study.grid,
        budget=study.budget.name,
        metric_name=study.metric_name,
        direction=study.direction,
        chance=study.chance,
        margin=study.stop_above_chance,
        seeds=tuple(study.comparison_seeds),
        models=tuple(models),
    )


def write_learnability(report: Learnability, out: Path) -> tuple[Path, Path]:
    """``learnability.json`` and ``report.md`` in ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    data = write_atomic(out / "learnability.json", json.dumps(asdict(report), indent=2) + "\n")
    return data, write_atomic(out / "report.md", report.markdown())
