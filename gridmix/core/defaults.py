"""Values that the lowest layers and the command line share without importing the library (no torch,
no numpy): the two directions a metric can be better in, the roles a model plays in a study, the
default practical threshold of an effect, and the backend --compile uses."""

DIRECTIONS = ("lower", "higher")  # which values of a metric are better
ROLES = ("idea", "baseline", "ablation", "control")  # what a model is in a study (ModelSpec.role)
DEFAULT_MIN_EFFECT = (
    "1%"  # gridmix.analysis.verdicts.MinEffect: below it a significant effect is "negligible"
)
COMPILE_BACKEND = (
    "inductor"  # torch.compile's backend for --compile (C++ on the CPU, Triton on CUDA)
)
