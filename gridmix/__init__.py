"""gridmix: does a structured token mixer beat attention on your grids?

The public API is listed in ``__all__``; docs/design.md describes the mathematics and the contracts.
"""

from gridmix.grid import Grid, GridLike
from gridmix.mixers import (
    CausalFactor,
    ConcentrationMixer,
    SemiseparableFactor,
    SymmetricFactor,
    TokenwiseMixer,
    dct_basis,
    tucker_flops,
)
from gridmix.mixers.concentration.ops.causal import causal_mode_product, causal_mode_product_dense
from gridmix.mixers.concentration.ops.semiseparable import semiseparable_kernel, semiseparable_mode_product
from gridmix.mixers.config import set_native, set_triton
from gridmix.mixers.registry import MixerSpec
from gridmix.report.types import Arm, Comparison, Report
from gridmix.study.fingerprint import data_fingerprint
from gridmix.suggest import did_you_mean
from gridmix.tracks import Backbone, ContractError, DataSizes, ModelSpec, Split, Track, TrackData
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.registry import BrokenPlugin, Registry, load_registry, validate_data
from gridmix.version import __version__

__all__ = [
    "Arm",
    "Backbone",
    "BrokenPlugin",
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
    "semiseparable_kernel",
    "semiseparable_mode_product",
    "set_native",
    "set_triton",
    "tucker_flops",
    "validate_data",
]
