"""Every rule that turns a study's numbers into words: the one place a verdict is decided.

:mod:`gridmix.analysis.stats` computes (the sign-flip test, its interval, its MDE, Holm's
arithmetic); this module judges, and returns numbers and words: a :class:`PairedComparison` per
compared pair, whose ``verdict`` is one of the strings below. The rules, in the order they are
applied (docs/analysis.md):

* **Level**: every test is at :data:`ALPHA`; the primary comparison, each mechanism question, each
  transfer grid and each model against the best reference are tested alone, the secondary baselines
  Holm-adjusted among themselves (:data:`FAMILIES`).
* **Test verdict** (:func:`compare`, :func:`compare_many`): significant when the (Holm) p is below
  α, said of the idea; "significant but negligible" when ``|mean(d)|`` is below the practical
  threshold (:class:`MinEffect`).
* **Report verdict** (:func:`judge`), overruling the test: ``identical`` when the arms agree on
  every seed; ``uninformative`` when both arms carry the same floor or ceiling flag
  (:func:`bound_flag`) and differ by no more than the MDE (:func:`uninformative`); ``cannot reach
  α`` when the family's Holm floor (:func:`holm_floor`) is not below α; else the test's verdict,
  named by the role of the arm it is about (:func:`named_by_role`).
* **Mechanism**: the ablation of a cap that never came within :data:`CAP_REACHED` of its bound is
  untestable (:func:`ablation_verdict`).

Every family goes through :func:`judge_family`; the report (:mod:`gridmix.report.build`) only
assembles the arms and renders the words, reading them back with :func:`side`, :func:`a_better`,
:func:`significant` and :func:`negligible`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gridmix.analysis.stats import (
    EXACT_MAX_N,
    N_RESAMPLES,
    check_unit_interval,
    holm,
    min_attainable_p,
    paired_differences,
    sign_flip_interval,
    sign_flip_mde,
    sign_flip_test,
    t_interval,
)
from gridmix.core.defaults import DIRECTIONS

ALPHA = 0.05  # every test's level
# the primary alone at α; secondary Holm; each mechanism question, transfer grid and reference alone
FAMILIES = ("primary", "secondary", "mechanism", "transfer", "reference")
MIN_PAIRS = 2  # a paired test needs this many seeds where both arms finished

FLOOR_BAND = 0.05  # "at chance": every seed within 5% of |ceiling − chance| of the chance level
CEILING_BAND = 0.005  # "at ceiling": every seed within 0.5% of that range of the ceiling
NOISE_SDS = 2  # … and the mean within this many seed standard deviations (ddof=1) of that level
FLAGS = ("at chance", "at ceiling")
CAP_REACHED = 0.98  # the cap is reached: the largest factor singular value within 2% of its bound

BETTER, WORSE = " better (significant)", " worse (significant)"
BETTER_NEGLIGIBLE = " better (significant but negligible)"  # significant, below the threshold
WORSE_NEGLIGIBLE = " worse (significant but negligible)"
VERDICT_BETTER = "idea" + BETTER
VERDICT_WORSE = "idea" + WORSE
VERDICT_BETTER_NEGLIGIBLE = "idea" + BETTER_NEGLIGIBLE
VERDICT_WORSE_NEGLIGIBLE = "idea" + WORSE_NEGLIGIBLE
VERDICT_NONE = "no significant difference"
VERDICT_UNREACHABLE = "cannot reach α (too few seeds)"
VERDICT_IDENTICAL = "identical: the comparison says nothing"  # the same value on every seed
VERDICT_CAP_INACTIVE = "untestable: the cap was inactive"  # the idea's eigenvalues never near it
VERDICT_NOT_COMPARED = "not compared"  # fewer than MIN_PAIRS seeds where both arms finished
UNINFORMATIVE = "uninformative: both arms {flag}"


@dataclass(frozen=True)
class MinEffect:
    """The practical threshold below which a significant effect is "negligible": ``value`` in the
    metric's units, or with ``relative`` a fraction of the compared arm's mean (``|b|``, the
    baseline's in idea − baseline)."""

    value: float
    relative: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.value) and self.value >= 0):
            raise ValueError(f"min effect {self.value!r}; expected a finite number >= 0")

    @classmethod
    def parse(cls, text: str | float) -> MinEffect:
        """``"1%"`` (relative to the compared arm's mean) or ``"0.005"`` (the metric's units);
        ``ValueError`` in one line otherwise."""
        spelled = str(text).strip()
        relative = spelled.endswith("%")
        try:
            value = float(spelled.removesuffix("%"))
        except ValueError:
            raise ValueError(
                f"min effect {spelled!r}; expected a number in the metric's units "
                "(e.g. 0.005) or a percentage of the compared arm's mean (e.g. 1%)"
            ) from None
        return cls(value / 100 if relative else value, relative)

    def threshold(self, baseline_mean: float) -> float:
        """The threshold in the metric's units for a comparison against an arm with this mean."""
        return self.value * abs(baseline_mean) if self.relative else self.value

    @property
    def spelled(self) -> str:
        """The threshold as :meth:`parse` reads it: ``"1%"`` or ``"0.005"``."""
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


@dataclass(frozen=True)
class PairedComparison:
    """One idea-versus-baseline comparison judged: its numbers and its verdict.

    ``per_seed_diffs`` and ``delta_mean`` are idea minus baseline. ``p_holm`` is ``p_value`` after
    Holm's adjustment over the comparisons made together (equal to ``p_value`` for a lone
    comparison); ``verdict`` is decided on ``p_holm``. ``ci_low``/``ci_high`` are the t-interval at
    level ``1 - alpha``; ``signflip_ci_low``/``signflip_ci_high`` the interval from inverting the
    sign-flip test at ``alpha`` (``None``: unbounded), which excludes 0 exactly when
    ``p_value < alpha``. ``min_effect`` is the practical threshold in the metric's units (``None``:
    none); a significant ``|delta_mean|`` below it is "significant but negligible". ``mde`` is the
    sign-flip test's minimum detectable effect (:func:`gridmix.analysis.stats.sign_flip_mde`, from
    the observed spread) at 80% power unless asked otherwise, ``None`` when no effect is detectable
    with this many pairs. The ``*_rel_pct`` fields are relative to ``|baseline_mean|`` in percent,
    and None when the baseline mean is 0.

    The reference report's ``mde`` is really the 95% t half-width (with t rounded to 2.365) and its
    ``mde_rel_pct`` is that half-width relative to the baseline mean. Here ``mde_rel_pct`` is the
    true MDE relative, and the half-width relative is ``ci_half_width_rel_pct``.
    """

    n_pairs: int
    per_seed_diffs: list[float]
    delta_mean: float
    idea_wins: int
    ties: int
    p_value: float
    p_holm: float
    p_method: str
    n_patterns: int
    ci_low: float
    ci_high: float
    ci_half_width: float
    ci_half_width_rel_pct: float | None
    mde: float | None
    mde_rel_pct: float | None
    baseline_mean: float
    idea_mean: float
    direction: str
    alpha: float
    verdict: str
    signflip_ci_low: float | None = None
    signflip_ci_high: float | None = None
    min_effect: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dict of plain Python values."""
        return dataclasses.asdict(self)


def compare(
    idea: Sequence[float],
    baseline: Sequence[float],
    *,
    direction: str,
    alpha: float = ALPHA,
    power: float = 0.8,
    exact_max_n: int = EXACT_MAX_N,
    n_resamples: int = N_RESAMPLES,
    rng_seed: int = 0,
    min_effect: MinEffect | None = None,
) -> PairedComparison:
    """Compare per-seed ``idea`` against ``baseline`` results (same seeds, same order).

    ``direction`` says which values are better, "lower" or "higher". The test, intervals and MDE all
    use ``alpha``; the verdict is significant when p < alpha, and "significant but negligible" when
    ``|mean(d)|`` is below ``min_effect``'s threshold for the baseline's mean.
    """
    if direction not in DIRECTIONS:
        raise ValueError(
            f"direction is {direction!r}; expected one of {DIRECTIONS!r} (which values are better)"
        )
    check_unit_interval(alpha, "alpha")
    d = paired_differences(idea, baseline)  # (n,)
    options = dict(exact_max_n=exact_max_n, n_resamples=n_resamples, rng_seed=rng_seed)
    test = sign_flip_test(d, **options)
    interval = t_interval(d, confidence=1 - alpha)
    inverted = sign_flip_interval(d, alpha=alpha, **options)
    mde = sign_flip_mde(d, alpha=alpha, power=power, rng_seed=rng_seed)
    baseline_mean = float(np.mean(baseline))
    delta_mean = float(d.mean())
    threshold = None if min_effect is None else min_effect.threshold(baseline_mean)
    return PairedComparison(
        n_pairs=int(d.size),
        per_seed_diffs=d.tolist(),
        delta_mean=delta_mean,
        idea_wins=int(np.count_nonzero(d < 0 if direction == "lower" else d > 0)),
        ties=int(np.count_nonzero(d == 0)),
        p_value=test.p_value,
        p_holm=test.p_value,
        p_method=test.method,
        n_patterns=test.n_patterns,
        ci_low=interval.low,
        ci_high=interval.high,
        ci_half_width=interval.half_width,
        ci_half_width_rel_pct=_relative_pct(interval.half_width, baseline_mean),
        mde=mde,
        mde_rel_pct=None if mde is None else _relative_pct(mde, baseline_mean),
        baseline_mean=baseline_mean,
        idea_mean=float(np.mean(idea)),
        direction=direction,
        alpha=alpha,
        verdict=tested_verdict(
            delta_mean, test.p_value, alpha=alpha, direction=direction, min_effect=threshold
        ),
        signflip_ci_low=inverted.low,
        signflip_ci_high=inverted.high,
        min_effect=threshold,
    )


def compare_many(
    comparisons: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    direction: str,
    alpha: float = ALPHA,
    **options: Any,
) -> dict[str, PairedComparison]:
    """Run :func:`compare` on each ``name -> (idea, baseline)`` and Holm-adjust across them.

    Each result keeps its raw ``p_value``, gains ``p_holm`` and takes its verdict from ``p_holm``.
    ``options`` are passed on to :func:`compare`.
    """
    if not comparisons:
        raise ValueError(
            "comparisons is empty; expected at least one name -> (idea, baseline) entry"
        )
    raw = {
        name: compare(idea, baseline, direction=direction, alpha=alpha, **options)
        for name, (idea, baseline) in comparisons.items()
    }
    adjusted = holm([result.p_value for result in raw.values()])
    return {
        name: dataclasses.replace(
            result,
            p_holm=float(p_holm),
            verdict=tested_verdict(
                result.delta_mean,
                float(p_holm),
                alpha=alpha,
                direction=direction,
                min_effect=result.min_effect,
            ),
        )
        for (name, result), p_holm in zip(raw.items(), adjusted, strict=True)
    }


def tested_verdict(
    delta_mean: float, p: float, *, alpha: float, direction: str, min_effect: float | None = None
) -> str:
    """The test's verdict, said of the idea: significant when ``p < alpha``, negligible below
    ``min_effect`` (in the metric's units; None: no threshold)."""
    if p >= alpha:
        return VERDICT_NONE
    better = (delta_mean < 0) == (direction == "lower")
    if min_effect is not None and abs(delta_mean) < min_effect:
        return VERDICT_BETTER_NEGLIGIBLE if better else VERDICT_WORSE_NEGLIGIBLE
    return VERDICT_BETTER if better else VERDICT_WORSE


def judge(
    result: PairedComparison, *, role: str, holm_over: int, flags: tuple[str | None, str | None]
) -> PairedComparison:
    """``result`` with its report verdict: identical when the arms agree on every seed,
    uninformative when both carry the same flag and differ by no more than the MDE, "cannot reach α"
    when the Holm floor of a family of ``holm_over`` is not below α, else the test's verdict said of
    arm ``a`` as ``role``."""
    verdict = named_by_role(result.verdict, role)
    if not any(result.per_seed_diffs):
        verdict = VERDICT_IDENTICAL
    elif flagged := uninformative(flags, result):
        verdict = flagged
    elif holm_floor(result.n_pairs, holm_over) >= ALPHA:
        verdict = VERDICT_UNREACHABLE
    return dataclasses.replace(result, verdict=verdict)


def judge_family(
    pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    direction: str,
    min_effect: MinEffect | None,
    roles: Mapping[str, str],
    flags: Mapping[str, tuple[str | None, str | None]],
) -> dict[str, PairedComparison]:
    """Each ``name -> (a values, b values)`` compared (a − b per seed), Holm-adjusted within the
    family (a family of one is a test alone at α) and judged by :func:`judge` with the arm ``a``'s
    ``roles[name]`` and the two arms' ``flags[name]``. Every pair needs :data:`MIN_PAIRS` values or
    more."""
    if not pairs:
        return {}
    compared = compare_many(pairs, direction=direction, alpha=ALPHA, min_effect=min_effect)
    return {
        name: judge(result, role=roles[name], holm_over=len(pairs), flags=flags[name])
        for name, result in compared.items()
    }


def holm_floor(n_pairs: int, comparisons: int = 1) -> float:
    """The smallest Holm-adjusted p a family of ``comparisons`` can reach with ``n_pairs`` pairs (at
    most 1)."""
    return min(1.0, comparisons * min_attainable_p(n_pairs))


def bound_flag(
    values: Sequence[float], *, chance: float | None, ceiling: float | None, direction: str
) -> str | None:
    """``"at chance"`` / ``"at ceiling"`` when an arm with these per-seed ``values`` sits there,
    else None.

    At a level: every seed within the band (:data:`FLOOR_BAND`, :data:`CEILING_BAND` of |ceiling −
    chance|, or of |chance| without a ceiling) of it, and the mean within :data:`NOISE_SDS` seed
    standard deviations (ddof=1) of it, so an arm whose seeds all stay off the level by more than
    their own spread is not at it, however wide the band. A seed (or the mean) worse than chance
    counts as at chance."""
    if not len(values) or chance is None:
        return None
    span = abs(ceiling - chance) if ceiling is not None else abs(chance)
    if span == 0:
        return None
    noise = NOISE_SDS * float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    mean = float(np.mean(values))

    def beyond(value: float) -> bool:  # worse than chance: below the floor is at the floor, too
        return value < chance if direction == "higher" else value > chance

    if all(abs(v - chance) <= FLOOR_BAND * span or beyond(v) for v in values) and (
        abs(mean - chance) <= noise or beyond(mean)
    ):
        return FLAGS[0]
    if (
        ceiling is not None
        and all(abs(v - ceiling) <= CEILING_BAND * span for v in values)
        and abs(mean - ceiling) <= noise
    ):
        return FLAGS[1]
    return None


def uninformative(flags: tuple[str | None, str | None], result: PairedComparison) -> str | None:
    """``"uninformative: both arms …"`` when both arms carry the same flag and their mean difference
    is within the comparison's MDE (an unreachable MDE bounds nothing); None when a difference the
    test can detect separates them."""
    if flags[0] is None or flags[0] != flags[1]:
        return None
    if result.mde is not None and abs(result.delta_mean) > result.mde:
        return None
    return UNINFORMATIVE.format(flag=flags[0])


def ablation_verdict(result: PairedComparison, signature: dict | None) -> PairedComparison:
    """The idea − ablation ``result``, untestable when the idea's largest learned factor singular
    value (over every seed, ``signature``) stayed below :data:`CAP_REACHED` of its bound: the cap
    never bound, so removing it cannot show what it does."""
    if (
        not signature
        or "error" in signature
        or "observed_max_factor_singular" not in signature
        or signature["observed_max_factor_singular"]
        >= CAP_REACHED * signature["predicted_factor_bound"]
    ):
        return result
    return dataclasses.replace(result, verdict=VERDICT_CAP_INACTIVE)


def named_by_role(verdict: str, role: str) -> str:
    """``verdict`` of a comparison ``a − b`` said of ``a`` as ``role`` ("idea better (significant)"
    is the test's wording, made for the idea; a mechanism question may ask it of the baseline)."""
    for suffix in (BETTER, WORSE, BETTER_NEGLIGIBLE, WORSE_NEGLIGIBLE):
        if verdict == "idea" + suffix:
            return role + suffix
    return verdict


def side(verdict: str) -> str | None:
    """``"better"`` or ``"worse"`` when ``verdict`` is significant (negligible or not), said of arm
    ``a`` by any role; None otherwise."""
    if verdict.endswith((BETTER, BETTER_NEGLIGIBLE)):
        return "better"
    return "worse" if verdict.endswith((WORSE, WORSE_NEGLIGIBLE)) else None


def significant(verdict: str) -> bool:
    """Whether ``verdict`` is a significant one (negligible or not)."""
    return side(verdict) is not None


def negligible(verdict: str) -> bool:
    """Whether ``verdict`` is significant but below the practical threshold."""
    return verdict.endswith((BETTER_NEGLIGIBLE, WORSE_NEGLIGIBLE))


def a_better(verdict: str) -> bool | None:
    """True when ``verdict`` says arm ``a`` is significantly better, False significantly worse, None
    without a verdict or with a negligible one."""
    if negligible(verdict):
        return None
    return {"better": True, "worse": False}.get(side(verdict))


def _relative_pct(value: float, baseline_mean: float) -> float | None:
    return None if baseline_mean == 0 else 100.0 * value / abs(baseline_mean)
