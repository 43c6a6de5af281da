"""gridmix: does a structured token mixer beat attention on your grids?

The public API is listed in ``__all__``; DESIGN.md describes the mathematics and the contracts.
"""

from gridmix.factors import CausalFactor, SymmetricFactor, dct_basis
from gridmix.grid import Grid, GridLike
from gridmix.mixer import ConcentrationMixer, tucker_flops

__version__ = "0.1.0"

__all__ = [
    "CausalFactor",
    "ConcentrationMixer",
    "Grid",
    "GridLike",
    "SymmetricFactor",
    "__version__",
    "dct_basis",
    "tucker_flops",
]
