"""The leak check run while a study is planned: no model, and no registered mixer a model is built
from, may see the future along the track's causal axes (:mod:`gridmix.mixers.causality` does the
probing; this module chooses what to probe, at which size, and keeps the record the report shows).
"""

from __future__ import annotations

from gridmix.core.grid import Grid
from gridmix.mixers.causality import (
    MAX_PROBES,
    Uncheckable,
    check_grid,
    first_leak,
    first_model_leak,
    model_probes,
    thresholds,
)
from gridmix.mixers.causality import describe as describe_leak
from gridmix.mixers.contract import MixerTable
from gridmix.tracks import DataSizes, Track

CHECK_DIM = 8  # channels of the leak check's mixer (two heads of four)


def check_causality(track: Track, names: tuple[str, ...], grid: Grid, mixers: MixerTable) -> dict:
    """Refuse (``ValueError``, one line), before any training, a model that leaks the future on the
    track's causal axes, or whose registered mixer does (:mod:`gridmix.mixers.causality`), and
    return what was checked: ``axes``, then per mixer and per model the ``grid`` it was checked on,
    the number of ``probes`` and the ``result`` (``"passed"``, or why it could not be checked).
    Empty when the track's backbone declares no causal axes."""
    backbone = track.backbone
    if backbone is None or not backbone.causal_axes:
        return {}
    axes = backbone.causal_axes
    record: dict = {"axes": list(axes), "mixers": {}, "models": {}}
    for name in names:
        mixer_name = track.model(name).mixer
        if mixer_name is None or mixer_name not in mixers or mixer_name in record["mixers"]:
            continue
        mixer, small = mixers[mixer_name], check_grid(grid, axes)
        layer = mixer.layer(small, causal_axes=axes, **backbone.mixer_kwargs.get(mixer_name, {}))
        try:
            leak = first_leak(
                lambda dtype, layer=layer: layer(
                    CHECK_DIM, num_heads=2, qkv_bias=True, dtype=dtype
                ),
                small,
                axes,
                dim=CHECK_DIM,
            )
        except Uncheckable as error:
            record["mixers"][mixer_name] = _checked(
                small, axes, MAX_PROBES, f"not checked: {error}"
            )
            continue
        if leak is not None:
            raise ValueError(describe_leak(mixer_name, leak, axes, small))
        record["mixers"][mixer_name] = _checked(small, axes, MAX_PROBES, "passed")
    try:
        # (S, …, *grid)
        inputs = track.make_data(grid, 0, DataSizes(n_train=8, n_val=1, n_test=1)).train.inputs
    # the fingerprint, next, refuses the study with the plugin's own message
    except Exception as error:
        inputs, missing = None, f"not checked: its data could not be built ({type(error).__name__})"
    for name in names:
        spec = track.model(name)
        if inputs is None:
            record["models"][name] = _checked(grid, axes, model_probes(grid), missing)
            continue
        try:
            leak = first_model_leak(
                lambda dtype, spec=spec: spec.build(grid).to(dtype),
                inputs[:1],
                grid,
                axes,
                values=None if inputs.is_floating_point() else inputs.unique(),
            )
        except Uncheckable as error:
            record["models"][name] = _checked(
                grid, axes, model_probes(grid), f"not checked: {error}"
            )
            continue
        if leak is not None:
            raise ValueError(describe_leak(name, leak, axes, grid))
        record["models"][name] = _checked(grid, axes, model_probes(grid), "passed")
    return record


def _checked(grid: Grid, axes: tuple[int, ...], budget: int, result: str) -> dict:
    """One line of the causality record: the grid checked on, the number of threshold probes, the
    result."""
    return {"grid": str(grid), "probes": len(thresholds(grid, axes, budget)), "result": result}
