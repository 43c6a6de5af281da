"""Parity audit: is the idea model compared with baselines of the same size? (docs/design.md section
3)

On one grid, every model's parameter count and forward+backward FLOPs of one training batch
(:func:`gridmix.analysis.measure.count_flops`), with the idea's ratios to each other model (``idea /
model``). One question is a fairness one, and only it warns: does the *matched baseline* (the model
that differs from the idea in the token mixer only, the primary comparison's) have the idea's
parameter count within the tolerance (10%)? Otherwise a difference between the two may come from
their size, not their mixing. FLOPs are reported, never warned about: spending fewer of them is what
a structured mixer is for; nor are the other models, which are not meant to match (the no-mixing
control has no mixing parameters at all). :func:`match_parameters` removes a parameter gap: it
bisects a model's ``ModelSpec.width_kwarg`` (a float keyword of ``build``, e.g. ``mlp_ratio``) until
the count is within 2% of a target, e.g. a baseline's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from torch import nn

from gridmix.analysis.measure import count_flops
from gridmix.analysis.scaling import prepare
from gridmix.core.grid import Grid, GridLike
from gridmix.core.records import pick
from gridmix.tracks import ModelSpec, Track

TOLERANCE = 0.10
PARITY_KWARGS_KEY = (
    "knobs"  # the report's stored name of model_kwargs (kept so stored reports do not change)
)


@dataclass(frozen=True)
class ParityRow:
    """One model; ratios are the idea's figure over this model's (1.0 for the idea itself)."""

    model: str
    role: str
    params: int | None
    flops: int | None  # forward + backward of one batch
    params_ratio: float | None
    flops_ratio: float | None
    warning: str | None = None
    skipped: str | None = None


@dataclass(frozen=True)
class Parity:
    track: str
    grid: str
    batch: int
    idea: str
    tolerance: float
    rows: list[ParityRow]
    matched_baseline: str | None = None

    @property
    def warnings(self) -> list[str]:
        return [row.warning for row in self.rows if row.warning]

    def to_dict(self) -> dict:
        return dict(
            pick(self, "track", "grid", "batch", "idea", "tolerance", "matched_baseline"),
            rows=[asdict(row) for row in self.rows],
            warnings=self.warnings,
        )


def parameter_warning(
    idea: str, baseline: str, params_ratio: float, tolerance: float
) -> str | None:
    """The one parity warning: the matched baseline's parameter count is off the idea's by more than
    ``tolerance`` (``None`` when within it)."""
    if abs(params_ratio - 1) <= tolerance:
        return None
    return (
        f"{idea} has {params_ratio:.4g} times the parameters of its matched baseline {baseline} "
        f"(beyond ±{tolerance:.0%}): a difference between them may come from their size, not their "
        f"token mixer; `--match-params {baseline}` evens it"
    )


def measure_cost(
    track: Track,
    spec: ModelSpec,
    grid: Grid,
    *,
    batch: int,
    seed: int,
    model_kwargs: dict | None = None,
) -> tuple[int, int]:
    """``spec``'s model on ``grid``: its parameters and the FLOPs of one training step (forward and
    backward of the track's loss on a batch of ``batch`` of its data), counted on fake tensors
    where the model allows."""
    model, inputs, targets = prepare(
        track, spec, grid, batch=batch, seed=seed, device="cpu", **(model_kwargs or {})
    )
    loss = lambda out: track.loss(out, targets)  # noqa: E731
    try:
        flops = count_flops(model, inputs, loss=loss, fake=True)
    except Exception:  # a model that branches on tensor values: count on the real batch instead
        flops = count_flops(model, inputs, loss=loss)
    return count_parameters(model), flops.total


def count_parameters(model: nn.Module) -> int:
    """Trainable and frozen parameters alike (a parametrised weight counts its stored
    ``original``)."""
    return sum(p.numel() for p in model.parameters())


def audit_parity(
    track: Track,
    grid: GridLike,
    *,
    models: Sequence[str] | None = None,
    batch: int = 8,
    seed: int = 0,
    tolerance: float = TOLERANCE,
    model_kwargs: dict[str, dict] | None = None,
) -> Parity:
    """Parameters and FLOPs of the idea against each model of ``track`` on ``grid`` (default: all
    models); a warning only when the matched baseline's parameter count is off the idea's by more
    than ``tolerance``.

    ``model_kwargs`` maps a model name to keyword overrides of its builder (e.g. the idea's matched
    width).
    """
    model_kwargs = model_kwargs or {}
    grid = track.check_grid(grid)
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance={tolerance}; expected a fraction in (0, 1), e.g. 0.1")
    names = list(models) if models else [m.name for m in track.models]
    if track.idea.name not in names:
        names.insert(0, track.idea.name)
    idea_params, idea_flops = measure_cost(
        track,
        track.idea,
        grid,
        batch=batch,
        seed=seed,
        model_kwargs=model_kwargs.get(track.idea.name),
    )
    rows = []
    for name in names:
        spec = track.model(name)
        if spec.role == "idea":
            rows.append(ParityRow(name, spec.role, idea_params, idea_flops, 1.0, 1.0))
            continue
        reason = spec.supports(grid)
        if reason:
            rows.append(
                ParityRow(name, spec.role, None, None, None, None, skipped=f"unsupported: {reason}")
            )
            continue
        params, flops = measure_cost(
            track, spec, grid, batch=batch, seed=seed, model_kwargs=model_kwargs.get(name)
        )
        params_ratio, flops_ratio = idea_params / params, idea_flops / flops
        warning = (
            parameter_warning(track.idea.name, name, params_ratio, tolerance)
            if name == track.matched_baseline
            else None
        )
        rows.append(ParityRow(name, spec.role, params, flops, params_ratio, flops_ratio, warning))
    return Parity(
        track=track.name,
        grid=str(grid),
        batch=batch,
        idea=track.idea.name,
        tolerance=tolerance,
        rows=rows,
        matched_baseline=track.matched_baseline,
    )


def parity_report(track: Track, grid: GridLike, **options) -> dict:
    """:func:`audit_parity` (``options`` are its keyword arguments) as a JSON-ready dict (the
    report's ``parity`` key), with the ``model_kwargs`` used."""
    parity = audit_parity(track, grid, **options)
    return dict(parity.to_dict(), **{PARITY_KWARGS_KEY: options.get("model_kwargs") or {}})


@dataclass(frozen=True)
class WidthMatch:
    """The width argument value whose model has ``params`` parameters, matched to ``target``."""

    kwarg: str
    value: float
    params: int
    target: int

    @property
    def rel_error(self) -> float:
        """How far ``params`` is off ``target``, as a fraction of ``target``."""
        return abs(self.params - self.target) / self.target

    def __post_init__(self) -> None:
        if self.params < 0 or self.target < 1:
            raise ValueError(
                f"params={self.params}, target={self.target}; expected params >= 0, target >= 1"
            )


def match_parameters(
    spec: ModelSpec,
    grid: GridLike,
    target_params: int,
    *,
    tolerance: float = 0.02,
    start: float = 1.0,
    max_builds: int = 60,
) -> WidthMatch:
    """Bisect ``spec.width_kwarg`` (assumed to grow the parameter count) to within ``tolerance`` of
    the target.

    The argument is first doubled or halved from ``start`` until the target is bracketed, then
    bisected geometrically. ``ValueError`` if the spec has no width argument, or no value within
    ``max_builds`` builds matches.
    """
    if not spec.width_kwarg:
        raise ValueError(
            f"model {spec.name!r} has no width_kwarg; parameter matching needs a float build "
            "keyword"
        )
    if target_params < 1 or not 0 < tolerance < 1 or start <= 0:
        raise ValueError(
            f"target_params={target_params}, tolerance={tolerance}, start={start}; expected "
            "a positive count, a fraction in (0, 1) and a positive start"
        )
    grid = Grid.parse(grid)
    tried: dict[float, int] = {}

    def params_at(value: float) -> int:
        if value not in tried:
            tried[value] = count_parameters(spec.build(grid, **{spec.width_kwarg: value}))
        return tried[value]

    def close(value: float) -> bool:
        return abs(params_at(value) - target_params) <= tolerance * target_params

    low = high = start
    while params_at(low) > target_params and len(tried) < max_builds:
        low /= 2
    while params_at(high) < target_params and len(tried) < max_builds:
        high *= 2
    value = min((low, high), key=lambda v: abs(params_at(v) - target_params))
    while not close(value) and len(tried) < max_builds:
        value = math.sqrt(low * high)
        if params_at(value) < target_params:
            low = value
        else:
            high = value
    best = min(tried, key=lambda v: abs(tried[v] - target_params))
    match = WidthMatch(kwarg=spec.width_kwarg, value=best, params=tried[best], target=target_params)
    if match.rel_error > tolerance:
        raise ValueError(
            f"cannot bring {spec.name!r} within {tolerance:.0%} of {target_params} parameters with "
            f"{spec.width_kwarg}: the closest, {spec.width_kwarg}={best:.4g}, gives {tried[best]}"
        )
    return match
