"""The track contract: what a plugin hands gridmix so that any task runs through the same analysis.

A :class:`Track` is everything needed to compare models on one task (docs/design.md section 4): the
grid dimensionality and default grid, deterministic data for ``(grid, seed, sizes)``, the loss, the
metric and its direction, and the models it offers (:class:`ModelSpec`), one of which is the idea
(the concentration mixer) and one its matched baseline (the same model with attention as the mixer).

Plugins build these through the hooks in :mod:`gridmix.tracks.hookspecs`. :class:`Track` and
:class:`ModelSpec` check their fields when constructed and raise :class:`ContractError`;
:mod:`gridmix.tracks.plugin_loader` adds the name of the plugin that built the bad object. Data is
checked lazily, once made: :meth:`TrackData.check`.

Shape legend:
    S: samples in a split; *grid: the grid's axes, which end every ``inputs`` tensor (the built-in
    tracks use channels first, ``(S, C, *grid)``); the rest of ``inputs``/``targets`` is the track's
    own
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from gridmix.core.defaults import DIRECTIONS, ROLES
from gridmix.core.grid import Grid
from gridmix.mixers.contract import MixerSpec
from gridmix.tracks.budget import Budget, DataSizes, resolve_budget

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SPLIT_NAMES = ("train", "val", "test")
SETTING_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
LADDER_SETTING = "difficulty"  # the setting whose values are a track's ladder (Track.ladder)
# Track.fixed_grid of a track that does not say whether its task is defined at other grids: transfer
# is refused there
UNDECLARED_GRIDS = "it does not declare its task defined at other grids (Track.fixed_grid)"


def label(kind: str, name: object, plugin: str = "") -> str:
    """``track 'image' (plugin 'image')``: how errors name a track or model, and its plugin once
    known."""
    return f"{kind} {name!r}" + (f" (plugin {plugin!r})" if plugin else "")


class ContractError(ValueError):
    """A :class:`Track` or :class:`ModelSpec` field that breaks the track contract, in one line.

    ``kind`` and ``name`` say which object (``"track"``, ``"image"``), ``problem`` what is wrong
    with it and ``plugin`` who built it (empty while a plugin's hook is still constructing it: the
    plugin manager then words the message with :meth:`blaming`).
    """

    def __init__(self, kind: str, name: object, problem: str, plugin: str = "") -> None:
        self.kind, self.name, self.problem, self.plugin = kind, name, problem, plugin
        super().__init__(f"{label(kind, name, plugin)}: {problem}")

    def __reduce__(self):  # picklable (a worker process may raise it) despite the custom signature
        return ContractError, (self.kind, self.name, self.problem, self.plugin)

    def blaming(self, plugin: str) -> str:
        """The message naming ``plugin`` as the builder, unless the object already names its own
        plugin."""
        return (
            str(self) if self.plugin else f"{label(self.kind, self.name, plugin)}: {self.problem}"
        )


def short(value: object) -> str:
    """``repr(value)`` cut to 60 characters, for error messages about arbitrary objects."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Split:
    """One split of a track's data, on the CPU.

    ``inputs`` (S, …, *grid): floating point (or int64, e.g. token ids), finite; ``targets`` (S, …):
    int64 class labels or floating point values. :meth:`TrackData.check` checks all of this.
    """

    inputs: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return self.inputs.shape[0]


@dataclass(frozen=True)
class TrackData:
    """The three splits; the learning-rate sweep chooses on ``val``, the comparison reports
    ``test``."""

    train: Split
    val: Split
    test: Split

    def check(self, grid: Grid) -> TrackData:
        """Check the splits against ``grid``; returns ``self`` or raises ``ValueError`` naming split
        and problem.

        Not in ``__post_init__``: it needs the grid, and it reads every value (a pass over the data
        the harness makes once per run, where a plugin's construction in ``make_data`` should stay
        cheap). Every split is a :class:`Split` of CPU tensors with as many targets as inputs and at
        least one sample; inputs end in the grid's axes and are finite floating point (or int64);
        targets are int64 or finite floating point; per-sample shapes and dtypes agree across the
        three splits.
        """
        reference = None
        for split_name in SPLIT_NAMES:
            split = getattr(self, split_name)
            if not isinstance(split, Split):
                raise ValueError(f"{split_name} is {type(split).__name__}; expected gridmix.Split")
            for part in ("inputs", "targets"):
                _check_tensor(getattr(split, part), f"{split_name}.{part}")
            inputs, targets = split.inputs, split.targets  # (S, …, *grid), (S, …)
            if inputs.shape[0] != targets.shape[0] or inputs.shape[0] == 0:
                raise ValueError(
                    f"{split_name} has {inputs.shape[0]} inputs and {targets.shape[0]} targets; "
                    f"expected equal, non-zero sample counts"
                )
            if inputs.ndim < 1 + grid.ndim or tuple(inputs.shape[-grid.ndim :]) != grid.shape:
                raise ValueError(
                    f"{split_name}.inputs has shape {tuple(inputs.shape)}; expected "
                    f"(S, …, {', '.join(map(str, grid))}) ending in the grid"
                )
            signature = (inputs.shape[1:], inputs.dtype, targets.shape[1:], targets.dtype)
            if reference is not None and signature != reference[1]:
                first, (in_shape, in_dtype, out_shape, out_dtype) = reference
                raise ValueError(
                    f"{split_name} has per-sample inputs {tuple(inputs.shape[1:])} {inputs.dtype}, "
                    f"targets {tuple(targets.shape[1:])} {targets.dtype}; {first} has "
                    f"{tuple(in_shape)} {in_dtype}, {tuple(out_shape)} {out_dtype}"
                )
            reference = reference or (split_name, signature)
        return self


def _check_tensor(tensor: object, where: str) -> None:
    """One split part: a non-scalar CPU tensor, floating point (finite) or int64."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{where} is {type(tensor).__name__}; expected a torch.Tensor")
    if tensor.device.type != "cpu" or tensor.ndim == 0:
        raise ValueError(
            f"{where} is a {tensor.ndim}-d tensor on {tensor.device}; expected (S, …) on the CPU"
        )
    if not (tensor.is_floating_point() or tensor.dtype == torch.int64):
        raise ValueError(
            f"{where} has dtype {tensor.dtype}; expected a floating dtype or torch.int64"
        )
    if tensor.is_floating_point() and not torch.isfinite(tensor).all():
        bad = int((~torch.isfinite(tensor)).sum())
        raise ValueError(f"{where} holds {bad} non-finite values (NaN or inf)")


@dataclass(frozen=True)
class ModelSpec:
    """A model a track offers: ``build(grid)`` returns a fresh ``nn.Module`` mapping inputs to
    predictions.

    ``role`` is ``"idea"`` for the concentration-mixer model, ``"ablation"`` for the idea with its
    mechanism removed (the eigenvalue cap: ``ConcentrationMixer(spectrum="uncapped")``),
    ``"control"`` for the same backbone without token mixing (:class:`gridmix.TokenwiseMixer`) and
    ``"baseline"`` otherwise; ``plugin`` and ``plugin_version`` are filled in by the plugin manager:
    the entry-point name of the plugin that contributed the model and the version of the
    distribution that ships it. ``supports(grid)`` says whether the model can be built for a grid
    (e.g. MLP-Mixer's dense N×N token MLP only on small grids); it returns ``None`` when it can,
    else a one-line reason. ``width_kwarg``, when set, names a float keyword argument of ``build``
    that scales the parameter count continuously (e.g. ``"mlp_ratio"``): the parity audit uses it to
    match a baseline's count. ``mixer``, when set, names the registered token mixer (``gridmix
    mixers``) the model is built around, so ``gridmix run --idea NAME`` finds it and its mechanism
    analysis and ablation are that mixer's.
    """

    name: str
    build: Callable[..., nn.Module]
    role: str = "baseline"
    description: str = ""
    supports: Callable[[Grid], str | None] = lambda grid: None
    width_kwarg: str | None = None
    plugin: str = ""
    plugin_version: str = ""
    mixer: str | None = None

    def __post_init__(self) -> None:
        """Check every field; :class:`ContractError` names the model, its plugin when known, and the
        value."""
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
            raise self._fail(
                f"name {self.name!r}; expected letters, digits, '-', '_' or '.', e.g. 'vit'"
            )
        if self.role not in ROLES:
            raise self._fail(f"role {self.role!r}; expected one of {ROLES}")
        for attribute in ("build", "supports"):
            if not callable(getattr(self, attribute)):
                raise self._fail(
                    f"{attribute} is {short(getattr(self, attribute))}; expected a callable"
                )
        if self.width_kwarg is not None and not isinstance(self.width_kwarg, str):
            raise self._fail(f"width_kwarg {self.width_kwarg!r}; expected None or a keyword name")
        if not isinstance(self.description, str):
            raise self._fail(f"description {short(self.description)}; expected a string")
        if self.mixer is not None and not isinstance(self.mixer, str):
            raise self._fail(
                f"mixer {short(self.mixer)}; expected None or a registered mixer's name"
            )

    def _fail(self, problem: str) -> ContractError:
        return ContractError("model", self.name, problem, self.plugin)


@dataclass(frozen=True)
class Backbone:
    """How a track builds a model around any registered token mixer: its matched baseline's network
    with the token mixer swapped, so every mixer trains in the same network, on the same data and
    seeds, as attention.

    ``build(grid, attn_layer, **model_kwargs)`` returns the model with ``attn_layer`` (timm's: a
    class constructed as ``attn_layer(dim, num_heads=…, **timm_kwargs)``) as every block's token
    mixer; ``model_kwargs`` are the model's own keyword arguments (``width_kwarg``). Models are
    named ``f"{prefix}-{mixer}"`` (the mixer's name alone when ``prefix`` is empty) unless the track
    already offers a model built around that mixer (``ModelSpec.mixer``). ``causal_axes`` and
    ``num_prefix_tokens`` are what every mixer must serve in this network; ``mixer_kwargs`` the
    mixer builder's keyword arguments the track sets per mixer name (e.g. ``{"concentration":
    {"rank": 16}}``). :meth:`around` is the one way a model is built around a registered mixer, and
    :meth:`model` declares such a model: every built-in track's models that name a registered mixer,
    and those the registry adds, are built by it.
    """

    build: Callable[..., nn.Module]
    prefix: str = ""
    causal_axes: tuple[int, ...] = ()
    num_prefix_tokens: int = 0
    mixer_kwargs: dict[str, dict] = field(default_factory=dict)
    width_kwarg: str | None = None

    def __post_init__(self) -> None:
        if not callable(self.build):
            raise ValueError(
                f"Backbone build is {short(self.build)}; expected a callable "
                "(grid, attn_layer, **model_kwargs)"
            )
        if self.prefix and not NAME_PATTERN.match(self.prefix):
            raise ValueError(
                f"Backbone prefix {self.prefix!r}; expected letters, digits, '-', '_' or '.'"
            )
        if not isinstance(self.causal_axes, tuple) or any(
            not isinstance(a, int) or a < 0 for a in self.causal_axes
        ):
            raise ValueError(
                f"Backbone causal_axes {self.causal_axes!r}; expected a tuple of grid axes"
            )

    def model_name(self, mixer: str) -> str:
        return f"{self.prefix}-{mixer}" if self.prefix else mixer

    def around(self, mixer: MixerSpec) -> Callable[..., nn.Module]:
        """A model builder ``(grid, **model_kwargs) -> nn.Module``: this network with the registered
        ``mixer`` as every block's token mixer, built by :meth:`MixerSpec.layer` (so each mixer
        module carries its name) with this backbone's causal axes, prefix tokens and the keyword
        arguments it sets for that mixer."""
        mixer_kwargs = dict(self.mixer_kwargs.get(mixer.name, {}))

        def build(grid: Grid, **model_kwargs) -> nn.Module:
            grid = Grid.parse(grid)
            layer = mixer.layer(
                grid,
                causal_axes=self.causal_axes,
                num_prefix_tokens=self.num_prefix_tokens,
                **mixer_kwargs,
            )
            return self.build(grid, layer, **model_kwargs)

        return build

    def model(self, name: str, mixer: MixerSpec, **fields) -> ModelSpec:
        """The track's model ``name`` built :meth:`around` the registered ``mixer``, naming it
        (``ModelSpec.mixer``); ``fields`` are the spec's others (``role``, ``description``,
        ``width_kwarg``, …)."""
        return ModelSpec(name, self.around(mixer), mixer=mixer.name, **fields)


def _always_at_hand() -> str | None:
    """:attr:`Track.data_missing` of a track that generates its data: nothing is ever missing."""
    return None


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
        budget_overrides: per budget name, fields of :class:`gridmix.tracks.budget.Budget` this
            track changes (e.g. more epochs for a harder task).
        supports: ``grid → None`` when the track can generate data on ``grid``, else a one-line
            reason (e.g. an axis too short for the task); :meth:`check_grid` applies it.
        chance: the metric's floor, the value a model reaches without learning (accuracy 0.5 on a
            balanced binary task; for MSE, e.g. the targets' variance), or a function of the grid
            (``grid → float``) where the floor depends on it (``occlusion``: 1/(H·W)); ``None`` when
            the track has none or declares ``training_mean`` instead.
        training_mean: for a forecasting track cut from one series (``fixed_split``), the mean of
            the series' training part in the targets' units (0 where the track standardises by it).
            The training-mean reference forecasts it for every step, and the study's chance level is
            that forecast's metric on the test windows the arms are tested on
            (:func:`gridmix.analysis.references.chance_level`), so the report names one number for
            both. ``None``: the chance level is ``chance``.
        ceiling: the metric's best attainable value where one exists (accuracy 1.0, MSE 0.0), else
            ``None``. The report flags arms whose seeds all sit at ``chance`` or ``ceiling`` as
            uninformative.
        fixed_split: the data is one fixed dataset (the user's files, a standard benchmark's split):
            every seed sees the same samples and varies only initialisation and batch order, so the
            report says that its inference is conditional on this dataset.
        default_models: the models ``gridmix run`` trains when ``--models`` is not given (the idea
            is always added); empty: every model the track offers (idea, baselines, ablation and
            control).
        plugin, plugin_version: filled in by the plugin manager (entry-point name, distribution
            version).
        source: for a track that reads the user's files, the file or folder its data comes from; its
            bytes enter the data fingerprint (:mod:`gridmix.study.fingerprint`). Empty for generated
            data.
        data_missing: ``() → None`` when the track's data is at hand, else a one-line reason (e.g.
            "needs --data-root DIR"); a cheap look, nothing is read. ``gridmix tracks`` shows it,
            and the CI benchmark skips such tracks.
        seasons: seasonal periods the data is known to have, in steps of the grid's first axis (e.g.
            the user's ``GRIDMIX_SEQUENCE_CSV_SEASON``); the seasonal-naive reference tries them
            beside its fixed list and the training windows' dominant period
            (:mod:`gridmix.analysis.references`). Empty: none known.
        extra_metrics: further test metrics by name, each ``(predictions, targets) → float`` on the
            test split (e.g. ``{"MASE": …}`` on a forecasting track). Every finished run stores them
            in its ``extras["test_metrics"]``; the report's naive-references section averages them
            per model over seeds and scores the references with them too
            (:mod:`gridmix.analysis.references`).
        backbone: how to build the matched baseline's network around any registered token mixer
            (:class:`Backbone`), so ``gridmix run --idea NAME`` and ``--baselines`` can train any
            mixer here; ``None``: the track offers only its own models.
        mixer_models: the models built around registered mixers the track does not name itself,
            filled in by the plugin registry from ``backbone``
            (:func:`gridmix.tracks.mixer_models.with_mixer_models`); found by :meth:`model` like the
            track's own, but not listed in ``models`` nor trained by default.
        fixed_grid: ``None`` when the task is defined at other grids (``make_data`` on another grid
            ``supports`` accepts makes the same task there, so a model trained on one grid can be
            tested on another: ``gridmix run --eval-grids``); else one line saying why not. The
            default, :data:`UNDECLARED_GRIDS`, says the track has not declared it.
        settings: the track's settings by name, with the values it was built with (e.g. ``{"pairs":
            4, "embed_dim": 64}``): what ``gridmix run --set NAME=VALUE`` and ``gridmix sweep --over
            NAME=…`` change. Integers, floats or strings; ``grid`` is not a setting (it is the
            study's grid).
        rebuild: ``rebuild(**settings) → Track``, the same track built with these setting values
            (every setting is given); required exactly when ``settings`` is not empty.
            :meth:`with_settings` calls it.
        ladder: the rungs of the track's difficulty ladder, easiest first: the values its
            ``difficulty`` setting takes (``gridmix sweep --over difficulty=…``, ``gridmix suite``);
            empty for a track of one difficulty. A track with a ladder has a ``difficulty``
            setting whose value is on it.
        draw_examples: ``draw_examples(grid, path)`` draws a few generated samples of this track, at
            its current settings (its rung), on ``grid`` into the PNG file ``path``; ``None``: the
            track draws none. Every study's report shows the picture (``examples.png``), and a
            drawing that raises costs the report only the picture (docs/plugins.md).
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
    chance: float | Callable[[Grid], float] | None = None
    ceiling: float | None = None
    training_mean: float | None = None
    default_models: tuple[str, ...] = ()
    fixed_split: bool = False
    plugin: str = ""
    plugin_version: str = ""
    source: str = ""
    data_missing: Callable[[], str | None] = _always_at_hand
    extra_metrics: dict[str, Callable[[torch.Tensor, torch.Tensor], float]] = field(
        default_factory=dict
    )
    seasons: tuple[int, ...] = ()
    backbone: Backbone | None = None
    mixer_models: tuple[ModelSpec, ...] = ()
    fixed_grid: str | None = UNDECLARED_GRIDS
    settings: dict[str, int | float | str] = field(default_factory=dict)
    rebuild: Callable[..., Track] | None = None
    ladder: tuple[str, ...] = ()
    draw_examples: Callable[[Grid, Path], None] | None = None

    @property
    def needs_data(self) -> bool:
        """Whether the track reads data from disk (it names a ``source`` or sets ``data_missing``),
        not generates it."""
        return bool(self.source) or self.data_missing is not _always_at_hand

    def __post_init__(self) -> None:
        """Normalise ``default_grid`` (any :meth:`Grid.parse` spelling) and ``models`` (a list) and
        check every field; :class:`ContractError` names the track, its plugin when known, the value
        and what is expected."""
        if not isinstance(self.models, tuple):
            object.__setattr__(
                self,
                "models",
                tuple(self.models) if isinstance(self.models, list) else (self.models,),
            )
        if isinstance(self.default_models, list):
            object.__setattr__(self, "default_models", tuple(self.default_models))
        try:
            object.__setattr__(self, "default_grid", Grid.parse(self.default_grid))
        except ValueError as error:
            raise self._fail(f"default_grid: {error}") from None
        if isinstance(self.mixer_models, list):
            object.__setattr__(self, "mixer_models", tuple(self.mixer_models))
        self._check_fields()
        self._check_models()
        self._check_mixer_models()
        self._check_budget_overrides()
        self._check_settings()

    @property
    def label(self) -> str:
        """``track 'image' (plugin 'image')``, how errors name this track."""
        return label("track", self.name, self.plugin)

    def _fail(self, problem: str) -> ContractError:
        return ContractError("track", self.name, problem, self.plugin)

    def _check_fields(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
            raise self._fail(
                f"name {self.name!r}; expected letters, digits, '-', '_' or '.', e.g. 'image'"
            )
        if (
            not isinstance(self.description, str)
            or not isinstance(self.metric_name, str)
            or not self.metric_name
        ):
            raise self._fail(
                f"description and metric_name must be strings, metric_name non-empty; got "
                f"{self.description!r}, {self.metric_name!r}"
            )
        if isinstance(self.ndim, bool) or not isinstance(self.ndim, int) or self.ndim < 1:
            raise self._fail(f"ndim {self.ndim!r}; expected an integer >= 1")
        if self.default_grid.ndim != self.ndim:
            raise self._fail(
                f"default_grid {self.default_grid} does not have ndim={self.ndim} axes"
            )
        for attribute in ("make_data", "loss", "metric", "supports"):
            if not callable(getattr(self, attribute)):
                raise self._fail(
                    f"{attribute} is {short(getattr(self, attribute))}; expected a callable"
                )
        if self.draw_examples is not None and not callable(self.draw_examples):
            raise self._fail(
                f"draw_examples is {short(self.draw_examples)}; expected None or a callable "
                "(grid, path) drawing a PNG"
            )
        reason = self.supports(self.default_grid)
        if reason is not None:
            raise self._fail(f"its own default_grid {self.default_grid} is unsupported: {reason}")
        if self.direction not in DIRECTIONS:
            raise self._fail(f"direction {self.direction!r}; expected one of {DIRECTIONS}")
        for attribute in ("chance", "ceiling", "training_mean"):
            value = getattr(self, attribute)
            if attribute == "chance" and callable(value):
                continue
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not float("-inf") < value < float("inf")
            ):
                raise self._fail(
                    f"{attribute} {value!r}; expected None or a finite number"
                    + (" or a function of the grid" if attribute == "chance" else "")
                )
        if self.training_mean is not None and (self.chance is not None or not self.fixed_split):
            raise self._fail(
                f"training_mean {self.training_mean!r} with chance {self.chance!r} and fixed_split "
                f"{self.fixed_split!r}; expected chance None (the training mean defines it) and "
                "fixed_split True (one test set to score it on)"
            )
        if not isinstance(self.extra_metrics, dict) or not all(
            isinstance(name, str) and name and callable(measure)
            for name, measure in self.extra_metrics.items()
        ):
            raise self._fail(
                f"extra_metrics {short(self.extra_metrics)}; expected a dict of name → "
                "callable(predictions, targets) → float"
            )
        if not isinstance(self.seasons, tuple) or any(
            isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in self.seasons
        ):
            raise self._fail(
                f"seasons {short(self.seasons)}; expected a tuple of whole numbers of steps >= 1"
            )

    def _check_models(self) -> None:
        if not self.models:
            raise self._fail(
                f"models {short(self.models)}; expected a non-empty tuple of gridmix.ModelSpec"
            )
        for spec in self.models:
            if not isinstance(spec, ModelSpec):
                raise self._fail(
                    f"models holds {type(spec).__name__} {short(spec)}; expected gridmix.ModelSpec"
                )
        names = [spec.name for spec in self.models]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise self._fail(f"model names {duplicates} appear more than once in {names}")
        ideas = [spec.name for spec in self.models if spec.role == "idea"]
        if len(ideas) != 1:
            raise self._fail(
                f"{len(ideas)} models with role 'idea' ({ideas}); expected exactly one"
            )
        for role in ("ablation", "control"):
            holders = [spec.name for spec in self.models if spec.role == role]
            if len(holders) > 1:
                raise self._fail(
                    f"{len(holders)} models with role {role!r} ({holders}); expected at most one"
                )
        baselines = [spec.name for spec in self.baselines]
        if self.matched_baseline not in baselines:
            raise self._fail(
                f"matched_baseline {self.matched_baseline!r} is not one of its baselines "
                f"{baselines}"
            )
        if not isinstance(self.default_models, tuple):
            raise self._fail(
                f"default_models {short(self.default_models)}; expected a tuple of model names"
            )
        unknown = [name for name in self.default_models if name not in names]
        if unknown:
            raise self._fail(
                f"default_models names {unknown}, which it does not offer; its models are {names}"
            )

    def _check_mixer_models(self) -> None:
        if self.backbone is not None and not isinstance(self.backbone, Backbone):
            raise self._fail(
                f"backbone {short(self.backbone)}; expected None or gridmix.tracks.Backbone"
            )
        own = {spec.name for spec in self.models}
        for spec in self.mixer_models:
            if (
                not isinstance(spec, ModelSpec)
                or spec.role != "baseline"
                or spec.name in own
                or spec.mixer is None
            ):
                raise self._fail(
                    f"mixer_models holds {short(spec)}; expected baselines built around a "
                    f"registered mixer, named unlike the track's own models {sorted(own)}"
                )

    def _check_budget_overrides(self) -> None:
        if not isinstance(self.budget_overrides, dict):
            raise self._fail(f"budget_overrides {short(self.budget_overrides)}; expected a dict")
        for budget in self.budget_overrides:
            try:
                self.budget(budget)
            except (TypeError, ValueError) as error:
                raise self._fail(f"budget_overrides[{budget!r}]: {error}") from None

    def _check_settings(self) -> None:
        if self.fixed_grid is not None and (
            not isinstance(self.fixed_grid, str) or not self.fixed_grid
        ):
            raise self._fail(
                f"fixed_grid {short(self.fixed_grid)}; expected None or a one-line reason"
            )
        if not isinstance(self.settings, dict) or any(
            not isinstance(name, str)
            or not SETTING_PATTERN.match(name)
            or name == "grid"
            or isinstance(value, bool)
            or not isinstance(value, (int, float, str))
            for name, value in self.settings.items()
        ):
            raise self._fail(
                f"settings {short(self.settings)}; expected a dict of lower-case names (not "
                "'grid') → int, float or str"
            )
        if not isinstance(self.ladder, tuple) or any(
            not isinstance(rung, str) or not rung for rung in self.ladder
        ):
            raise self._fail(f"ladder {short(self.ladder)}; expected a tuple of rung names")
        if self.ladder and self.settings.get(LADDER_SETTING) not in self.ladder:
            raise self._fail(
                f"ladder {' < '.join(self.ladder)} with {LADDER_SETTING}="
                f"{self.settings.get(LADDER_SETTING)!r}; expected a {LADDER_SETTING} setting whose "
                "value is on the ladder"
            )
        if (self.rebuild is None) != (not self.settings) or (
            self.rebuild is not None and not callable(self.rebuild)
        ):
            raise self._fail(
                f"rebuild {short(self.rebuild)} with settings {sorted(self.settings)}; expected a "
                "callable rebuild(**settings) exactly when the track has settings"
            )

    def setting_value(self, name: str, value: object) -> int | float | str:
        """``value`` (a command line's text, or a number) as setting ``name`` takes it, in the type
        of its default; ``ValueError`` in one line for an unknown setting (listing the track's), a
        value of another type or a float setting's value that is not finite (``inf``, ``nan``). The
        value's range is the track's to check: :meth:`with_settings` rebuilds the track, whose own
        checks refuse it (e.g. a backbone's ``embed_dim`` below 1)."""
        if name not in self.settings:
            known = ", ".join(sorted(self.settings)) or "none"
            raise ValueError(
                f"track {self.name!r} has no setting {name!r}; its settings are {known} (and grid)"
            )
        default = self.settings[name]
        kind = type(default)
        converted = None
        if isinstance(value, str) and kind is not str:
            try:
                converted = kind(value.strip())  # int("3.5") refuses, as it should
            except ValueError:
                pass
        elif kind is float and type(value) in (int, float):
            converted = float(value)
        elif type(value) is kind:
            converted = value
        if converted is not None and (kind is not float or math.isfinite(converted)):
            return converted
        finite = "a finite " if kind is float else ""
        raise ValueError(
            f"track {self.name!r}: setting {name}={value!r}; expected {finite}{kind.__name__} like "
            f"its default {default!r}"
        )

    def with_settings(self, settings: dict) -> Track:
        """The track rebuilt with ``settings`` (name → value, each converted by
        :meth:`setting_value`); ``self`` when they are its own values. ``ValueError`` in one line
        for an unknown setting or a value the plugin refuses."""
        values = {
            **self.settings,
            **{name: self.setting_value(name, value) for name, value in settings.items()},
        }
        if values == self.settings:
            return self
        try:
            rebuilt = self.rebuild(**values)
        except (TypeError, ValueError) as error:
            changed = ", ".join(f"{k}={v!r}" for k, v in values.items() if self.settings[k] != v)
            raise ValueError(f"track {self.name!r} with {changed}: {error}") from None
        if (
            not isinstance(rebuilt, Track)
            or rebuilt.name != self.name
            or rebuilt.settings != values
        ):
            raise self._fail(
                f"rebuild(**{values}) returned {short(rebuilt)}; expected track {self.name!r} with "
                "those settings"
            )
        return rebuilt

    def budget(self, name: str, **command_line) -> Budget:
        """The budget ``name`` as this track runs it: the built-in one, this track's overrides, then
        the command line's ``seeds``, ``lrs``, ``epochs`` and ``n_train``
        (:func:`gridmix.tracks.budget.resolve_budget`)."""
        return resolve_budget(
            name, self.budget_overrides, owner=f"track {self.name!r}", **command_line
        )

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
        for spec in (*self.models, *self.mixer_models):
            if spec.name == name:
                return spec
        also = (
            f" and {self.backbone.model_name('<mixer>')} for every registered mixer"
            if self.backbone
            else ""
        )
        raise ValueError(
            f"track {self.name!r} has no model {name!r}; it offers "
            f"{[m.name for m in self.models]}{also}"
        )

    def model_for_mixer(self, mixer: str) -> ModelSpec | None:
        """The track's model built around the registered mixer ``mixer`` (its own, else from the
        backbone), or None."""
        return next(
            (spec for spec in (*self.models, *self.mixer_models) if spec.mixer == mixer), None
        )

    def check_grid(self, grid: Grid | str | int | tuple[int, ...]) -> Grid:
        """Parse ``grid``, check its dimensionality and :attr:`supports`; ``ValueError`` says what
        the track accepts."""
        grid = Grid.parse(grid)
        if grid.ndim != self.ndim:
            raise ValueError(
                f"track {self.name!r} takes {self.ndim}-d grids (e.g. {self.default_grid}); "
                f"got the {grid.ndim}-d grid {grid}"
            )
        reason = self.supports(grid)
        if reason is not None:
            raise ValueError(f"track {self.name!r} cannot use grid {grid}: {reason}")
        return grid
