"""The concentration mixer: the layer (:mod:`.layer`), its per-axis factors (:mod:`.factors`) and
the operators they run (``ops/``: the Tucker chain and its native and Triton kernels, the causal
Toeplitz and semiseparable forms)."""

from gridmix.mixers.concentration.factors import (
    CausalFactor,
    SemiseparableFactor,
    SymmetricFactor,
    dct_basis,
)
from gridmix.mixers.concentration.layer import CAUSAL_FORMS, ConcentrationMixer, tucker_flops

__all__ = [
    "CAUSAL_FORMS",
    "CausalFactor",
    "ConcentrationMixer",
    "SemiseparableFactor",
    "SymmetricFactor",
    "dct_basis",
    "tucker_flops",
]
