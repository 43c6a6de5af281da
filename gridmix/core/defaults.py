"""Values that the lowest layers and the command line share without importing the library (no torch,
no numpy): the two directions a metric can be better in, and the default practical threshold of an
effect."""

DIRECTIONS = ("lower", "higher")  # which values of a metric are better
DEFAULT_MIN_EFFECT = (
    "1%"  # gridmix.analysis.verdicts.MinEffect: below it a significant effect is "negligible"
)
