"""How long a study has left, estimated from its own finished runs: each pending run is expected to
take the median time of the finished runs of its model (of all finished runs while its model has
none), and ``jobs`` workers share them. Runs resumed from the ledger count with their recorded
times; nothing is estimated before a run finishes. :meth:`RunClock.untimed` names the pending models
counted at the overall median, so the log can say the estimate is a guess for them (a dense
baseline's first run can take five times the others')."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class RunClock:
    """The finished runs' seconds per model, and the estimate of what is left
    (:meth:`remaining_s`)."""

    jobs: int = 1
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise ValueError(f"RunClock jobs={self.jobs}; expected >= 1")

    def record(self, model: str, seconds: float) -> None:
        """A finished run of ``model`` that took ``seconds`` (a failed run that took none is left
        out)."""
        if seconds > 0:
            self.seconds.setdefault(model, []).append(float(seconds))

    def remaining_s(self, pending: Iterable[str]) -> float | None:
        """Seconds left for the runs of the models in ``pending`` (one entry per run), or ``None``
        before any run has finished."""
        every = [s for values in self.seconds.values() for s in values]
        if not every:
            return None
        overall = statistics.median(every)
        per_model = {model: statistics.median(values) for model, values in self.seconds.items()}
        return sum(per_model.get(model, overall) for model in pending) / self.jobs

    def untimed(self, pending: Iterable[str]) -> list[str]:
        """The models in ``pending`` with no finished run yet, in order of first appearance."""
        return [model for model in dict.fromkeys(pending) if model not in self.seconds]


def format_duration(seconds: float) -> str:
    """``"4 min 10 s"``, ``"35 s"``, ``"under 1 s"``: the estimate as the log prints it (whole
    seconds)."""
    if seconds < 0.5:
        return "under 1 s"
    whole = round(seconds)
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def time_left(seconds: float) -> str:
    """``"about 4 min 10 s left"``, or ``"under 1 s left"`` (not "about under 1 s"): the estimate's
    phrase in the progress line and the log."""
    if seconds < 0.5:
        return f"{format_duration(seconds)} left"
    return f"about {format_duration(seconds)} left"
