"""gridmix: does a structured token mixer beat attention on your grids?

The public API is listed in ``__all__``; docs/design.md describes the mathematics and the contracts.

The names load on first use (PEP 562, :func:`__getattr__`): ``import gridmix`` and the command
line's ``--help`` import no torch, so help answers at once; ``from gridmix import
ConcentrationMixer`` imports what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridmix.core.lazy import lazy_names
from gridmix.core.version import __version__

# The same names, for type checkers and readers (and the layer test, which reads imports).
if TYPE_CHECKING:
    from gridmix.core.grid import Grid, GridLike
    from gridmix.core.suggest import did_you_mean
    from gridmix.mixers.concentration.factors import (
        CausalFactor,
        SemiseparableFactor,
        SymmetricFactor,
        dct_basis,
    )
    from gridmix.mixers.concentration.layer import ConcentrationMixer, tucker_flops
    from gridmix.mixers.concentration.ops.causal import (
        causal_mode_product,
        causal_mode_product_dense,
    )
    from gridmix.mixers.concentration.ops.semiseparable import (
        semiseparable_kernel,
        semiseparable_mode_product,
    )
    from gridmix.mixers.contract import MixerSpec
    from gridmix.mixers.switches import set_native
    from gridmix.mixers.tokenwise import TokenwiseMixer
    from gridmix.orchestrate.callbacks import Callbacks
    from gridmix.orchestrate.front_door import run, sweep
    from gridmix.orchestrate.suiting import suite
    from gridmix.report.types import Arm, Comparison, Report
    from gridmix.study.fingerprint import data_fingerprint
    from gridmix.tracks import (
        Backbone,
        ContractError,
        DataSizes,
        ModelSpec,
        Split,
        Track,
        TrackData,
    )
    from gridmix.tracks.hookspecs import hookimpl
    from gridmix.tracks.plugin_loader import (
        BrokenPlugin,
        Registry,
        load_registry,
        mixer_layer,
        validate_data,
    )

_SOURCES = {  # public name -> the module that defines it
    "Grid": "gridmix.core.grid",
    "GridLike": "gridmix.core.grid",
    **dict.fromkeys(
        ("CausalFactor", "SemiseparableFactor", "SymmetricFactor", "dct_basis"),
        "gridmix.mixers.concentration.factors",
    ),
    **dict.fromkeys(("ConcentrationMixer", "tucker_flops"), "gridmix.mixers.concentration.layer"),
    "TokenwiseMixer": "gridmix.mixers.tokenwise",
    "causal_mode_product": "gridmix.mixers.concentration.ops.causal",
    "causal_mode_product_dense": "gridmix.mixers.concentration.ops.causal",
    "semiseparable_kernel": "gridmix.mixers.concentration.ops.semiseparable",
    "semiseparable_mode_product": "gridmix.mixers.concentration.ops.semiseparable",
    "set_native": "gridmix.mixers.switches",
    "MixerSpec": "gridmix.mixers.contract",
    "Callbacks": "gridmix.orchestrate.callbacks",
    "run": "gridmix.orchestrate.front_door",
    "sweep": "gridmix.orchestrate.front_door",
    "suite": "gridmix.orchestrate.suiting",
    **dict.fromkeys(("Arm", "Comparison", "Report"), "gridmix.report.types"),
    "data_fingerprint": "gridmix.study.fingerprint",
    "did_you_mean": "gridmix.core.suggest",
    **dict.fromkeys(
        ("Backbone", "ContractError", "DataSizes", "ModelSpec", "Split", "Track", "TrackData"),
        "gridmix.tracks",
    ),
    "hookimpl": "gridmix.tracks.hookspecs",
    **dict.fromkeys(
        ("BrokenPlugin", "Registry", "load_registry", "mixer_layer", "validate_data"),
        "gridmix.tracks.plugin_loader",
    ),
}

__all__ = [
    "Arm",
    "Backbone",
    "BrokenPlugin",
    "Callbacks",
    "CausalFactor",
    "Comparison",
    "ConcentrationMixer",
    "ContractError",
    "DataSizes",
    "Grid",
    "GridLike",
    "MixerSpec",
    "ModelSpec",
    "Registry",
    "Report",
    "SemiseparableFactor",
    "Split",
    "SymmetricFactor",
    "TokenwiseMixer",
    "Track",
    "TrackData",
    "__version__",
    "causal_mode_product",
    "causal_mode_product_dense",
    "data_fingerprint",
    "dct_basis",
    "did_you_mean",
    "hookimpl",
    "load_registry",
    "mixer_layer",
    "run",
    "semiseparable_kernel",
    "semiseparable_mode_product",
    "set_native",
    "suite",
    "sweep",
    "tucker_flops",
    "validate_data",
]


__getattr__, __dir__ = lazy_names("gridmix", _SOURCES, globals())
