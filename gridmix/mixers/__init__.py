"""Every token mixer gridmix builds, one module or folder each, the mixer contract they meet
(:mod:`.contract`) and their fast-path switches (:mod:`.switches`).

``concentration/`` is the concentration mixer (the layer, its factors, and ``ops/``: the Tucker
chain, the causal forms and the native kernels); :mod:`.tokenwise` is the control that mixes no
tokens. The package exports nothing itself: each name is imported from the module that defines it
(``gridmix`` lists the public ones).
"""
