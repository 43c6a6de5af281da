"""gridmix: does a structured token mixer beat attention on your grids?

The public API is listed in ``__all__``; docs/design.md describes the mathematics and the contracts.
"""

from gridmix.factors import CausalFactor, SymmetricFactor, dct_basis
from gridmix.fingerprint import data_fingerprint
from gridmix.grid import Grid, GridLike
from gridmix.hookspecs import hookimpl
from gridmix.mixer import ConcentrationMixer, tucker_flops
from gridmix.plugins import BrokenPlugin, Registry, load_registry, validate_data
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData

__version__ = "0.1.0"

__all__ = [
    "BrokenPlugin",
    "CausalFactor",
    "ConcentrationMixer",
    "DataSizes",
    "Grid",
    "GridLike",
    "ModelSpec",
    "Registry",
    "Split",
    "SymmetricFactor",
    "Track",
    "TrackData",
    "__version__",
    "data_fingerprint",
    "dct_basis",
    "hookimpl",
    "load_registry",
    "tucker_flops",
    "validate_data",
]
