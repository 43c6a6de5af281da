"""Every token mixer gridmix builds, one module or folder each, the mixer contract they meet
(:mod:`.contract`) and their fast-path switches (:mod:`.switches`).

``concentration/`` is the concentration mixer (the layer, its factors, and ``ops/``: the Tucker
chain, the causal forms and the native kernels); :mod:`.tokenwise` is the control that mixes no
tokens.
"""

from gridmix.mixers.concentration import (
    CAUSAL_FORMS,
    CausalFactor,
    ConcentrationMixer,
    SemiseparableFactor,
    SymmetricFactor,
    dct_basis,
    tucker_flops,
)
from gridmix.mixers.switches import native_enabled, set_native
from gridmix.mixers.tokenwise import TokenwiseMixer

__all__ = [
    "CAUSAL_FORMS",
    "CausalFactor",
    "ConcentrationMixer",
    "SemiseparableFactor",
    "SymmetricFactor",
    "TokenwiseMixer",
    "dct_basis",
    "native_enabled",
    "set_native",
    "tucker_flops",
]
