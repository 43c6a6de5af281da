"""The track contract: what a plugin hands gridmix so that any task runs through the same analysis.

A :class:`Track` is everything needed to compare models on one task (docs/design.md section 4): the grid
dimensionality and default grid, deterministic data for ``(grid, seed, sizes)``, the loss, the metric
and its direction, and the models it offers (:class:`ModelSpec`), one of which is the idea (the
concentration mixer) and one its matched baseline (the same model with attention as the mixer).

Plugins build these through the hooks in :mod:`gridmix.hookspecs`; :mod:`gridmix.plugins` validates
what they hand over and names the plugin when something is wrong.

Shape legend:
    S: samples in a split; *grid: the grid's axes, which end every ``inputs`` tensor (the built-in tracks
    use channels first, ``(S, C, *grid)``); the rest of ``inputs``/``targets`` is the track's own
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from gridmix.grid import Grid

DIRECTIONS = ("lower", "higher")
ROLES = ("idea", "baseline", "ablation", "control")


@dataclass(frozen=True)
class Split:
    """One split of a track's data, on the CPU.

    ``inputs`` (S, …, *grid): floating point (or int64, e.g. token ids), finite; ``targets`` (S, …): int64
    class labels or floating point values. :func:`gridmix.plugins.validate_data` checks all of this.
    """

    inputs: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return self.inputs.shape[0]


@dataclass(frozen=True)
class TrackData:
    """The three splits; the learning-rate sweep chooses on ``val``, the comparison reports ``test``."""

    train: Split
    val: Split
    test: Split


@dataclass(frozen=True)
class DataSizes:
    """How many samples each split holds (the run budget chooses these)."""

    n_train: int
    n_val: int
    n_test: int


@dataclass(frozen=True)
class ModelSpec:
    """A model a track offers: ``build(grid)`` returns a fresh ``nn.Module`` mapping inputs to predictions.

    ``role`` is ``"idea"`` for the concentration-mixer model, ``"ablation"`` for the idea with its mechanism
    removed (the eigenvalue cap: ``ConcentrationMixer(spectrum="uncapped")``), ``"control"`` for the same
    backbone without token mixing (:class:`gridmix.TokenwiseMixer`) and ``"baseline"`` otherwise; ``plugin`` and
    ``plugin_version`` are filled in by the plugin manager: the entry-point name of the plugin that contributed
    the model and the version of the distribution that ships it.
    ``supports(grid)`` says whether the model can be built for a grid (e.g. MLP-Mixer's dense N×N token
    MLP only on small grids); it returns ``None`` when it can, else a one-line reason.
    ``width_knob``, when set, names a float keyword argument of ``build`` that scales the parameter
    count continuously (e.g. ``"mlp_ratio"``): the parity audit uses it to match a baseline's count.
    """

    name: str
    build: Callable[..., nn.Module]
    role: str = "baseline"
    description: str = ""
    supports: Callable[[Grid], str | None] = lambda grid: None
    width_knob: str | None = None
    plugin: str = ""
    plugin_version: str = ""


@dataclass(frozen=True)
class Track:
    """A task gridmix compares models on.

    Attributes:
        name: unique track name (``gridmix run --track NAME``).
        description: one line for ``gridmix tracks``.
        ndim: grid dimensionality ``d`` every grid of this track must have.
        default_grid: the grid used when the user gives none.
        make_data: ``(grid, seed, sizes) → TrackData``, deterministic in its arguments.
        loss: ``(predictions, targets) → scalar tensor`` minimised in training.
        metric: ``(predictions, targets) → float`` over a whole split (e.g. accuracy, MSE).
        metric_name: e.g. ``"test MSE"`` or ``"accuracy"``.
        direction: ``"lower"`` or ``"higher"`` is better.
        models: the models offered, in display order; exactly one with ``role="idea"``, at most one
            ``"ablation"`` and one ``"control"`` (docs/analysis.md, "Mechanism").
        matched_baseline: the baseline that differs from the idea in the token mixer only.
        budget_overrides: per budget name, fields of :class:`gridmix.budget.Budget` this track changes
            (e.g. more epochs for a harder task).
        supports: ``grid → None`` when the track can generate data on ``grid``, else a one-line reason
            (e.g. an axis too short for the task); :meth:`check_grid` applies it.
        chance: the metric's floor, the value a model reaches without learning (accuracy 0.5 on a balanced
            binary task; for MSE, e.g. the targets' variance); ``None`` when the track has none.
        ceiling: the metric's best attainable value where one exists (accuracy 1.0, MSE 0.0), else ``None``.
            The report flags arms whose seeds all sit at ``chance`` or ``ceiling`` as uninformative.
        fixed_split: the data is one fixed dataset (the user's files, a standard benchmark's split): every seed
            sees the same samples and varies only initialisation and batch order, so the report says that its
            inference is conditional on this dataset.
        default_models: the models ``gridmix run`` trains when ``--models`` is not given (the idea is always
            added); empty: every model the track offers (idea, baselines, ablation and control).
        plugin, plugin_version: filled in by the plugin manager (entry-point name, distribution version).
        source: for a track that reads the user's files, the file or folder its data comes from; its bytes
            enter the data fingerprint (:mod:`gridmix.fingerprint`). Empty for generated data.
        data_missing: ``() → None`` when the track's data is at hand, else a one-line reason (e.g. "needs
            --data-root DIR"); a cheap look, nothing is read. ``gridmix tracks`` shows it, and the CI benchmark
            skips such tracks.
    """

    name: str
    description: str
    ndim: int
    default_grid: Grid
    make_data: Callable[[Grid, int, DataSizes], TrackData]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    metric: Callable[[torch.Tensor, torch.Tensor], float]
    metric_name: str
    direction: str
    models: tuple[ModelSpec, ...]
    matched_baseline: str
    budget_overrides: dict[str, dict] = field(default_factory=dict)
    supports: Callable[[Grid], str | None] = lambda grid: None
    chance: float | None = None
    ceiling: float | None = None
    default_models: tuple[str, ...] = ()
    fixed_split: bool = False
    plugin: str = ""
    plugin_version: str = ""
    source: str = ""
    data_missing: Callable[[], str | None] = lambda: None

    @property
    def idea(self) -> ModelSpec:
        return next(m for m in self.models if m.role == "idea")

    @property
    def baselines(self) -> tuple[ModelSpec, ...]:
        return tuple(m for m in self.models if m.role == "baseline")

    @property
    def ablation(self) -> ModelSpec | None:
        """The idea with its mechanism removed (role ``"ablation"``), or None."""
        return next((m for m in self.models if m.role == "ablation"), None)

    @property
    def control(self) -> ModelSpec | None:
        """The same backbone without token mixing (role ``"control"``), or None."""
        return next((m for m in self.models if m.role == "control"), None)

    def model(self, name: str) -> ModelSpec:
        for spec in self.models:
            if spec.name == name:
                return spec
        raise ValueError(f"track {self.name!r} has no model {name!r}; it offers {[m.name for m in self.models]}")

    def check_grid(self, grid: Grid | str | int | tuple[int, ...]) -> Grid:
        """Parse ``grid``, check its dimensionality and :attr:`supports`; ``ValueError`` says what the track accepts."""
        grid = Grid.parse(grid)
        if grid.ndim != self.ndim:
            raise ValueError(f"track {self.name!r} takes {self.ndim}-d grids (e.g. {self.default_grid}); "
                             f"got the {grid.ndim}-d grid {grid}")
        reason = self.supports(grid)
        if reason is not None:
            raise ValueError(f"track {self.name!r} cannot use grid {grid}: {reason}")
        return grid
