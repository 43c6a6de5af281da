"""The rules of gridmix.analysis.verdicts one by one (identical arms, negligible, uninformative,
unreachable, naming by role, the floor and ceiling bands, the cap), and the transfer comparison
judged by the same rules as the primary one."""

import dataclasses

import pytest

from gridmix.analysis import verdicts
from gridmix.analysis.verdicts import (
    VERDICT_BETTER,
    VERDICT_BETTER_NEGLIGIBLE,
    VERDICT_CAP_INACTIVE,
    VERDICT_IDENTICAL,
    VERDICT_NONE,
    VERDICT_UNREACHABLE,
    MinEffect,
    ablation_verdict,
    bound_flag,
    compare,
    holm_floor,
    judge,
    judge_family,
    named_by_role,
)
from gridmix.report.build import study_report
from tests import report_example

BASE = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0]  # six seeds of a lower-is-better metric
BETTER_BY = [value - 0.2 for value in BASE]  # lower on every seed: p = 2/64, far above 1% of it
NO_FLAGS = (None, None)


def judged(a, b, *, role="idea", flags=NO_FLAGS, holm_over=1, min_effect="1%"):
    result = compare(a, b, direction="lower", min_effect=MinEffect.parse(min_effect))
    return judge(result, role=role, holm_over=holm_over, flags=flags)


def test_the_test_verdict_and_its_name_by_role():
    assert judged(BETTER_BY, BASE).verdict == VERDICT_BETTER
    assert judged(BETTER_BY, BASE, role="baseline").verdict == "baseline better (significant)"
    assert judged(BASE, BETTER_BY, role="control").verdict == "control worse (significant)"
    assert named_by_role(VERDICT_NONE, "baseline") == VERDICT_NONE  # only a significant one names
    assert verdicts.a_better("control worse (significant)") is False
    assert verdicts.side("baseline better (significant but negligible)") == "better"


def test_arms_equal_on_every_seed_are_identical_whatever_else_holds():
    result = judged(BASE, BASE, flags=("at chance", "at chance"))
    assert result.verdict == VERDICT_IDENTICAL and result.delta_mean == 0 and result.p_value == 1


def test_a_significant_difference_below_the_threshold_is_negligible():
    tiny = [value - 1e-5 for value in BASE]  # significant (p = 2/64), below 1 % of the mean 1.0
    assert judged(tiny, BASE).verdict == VERDICT_BETTER_NEGLIGIBLE
    assert judged(tiny, BASE, min_effect="1e-6").verdict == VERDICT_BETTER  # a threshold below it
    named = judged(tiny, BASE, role="baseline").verdict
    assert named == "baseline better (significant but negligible)"
    assert verdicts.significant(named) and verdicts.negligible(named)
    assert verdicts.a_better(named) is None


def test_arms_with_the_same_flag_are_uninformative_only_within_the_mde():
    near = [value - 0.001 * (i % 2) for i, value in enumerate(BASE)]  # within the MDE of the spread
    both = judged(near, BASE, flags=("at chance",) * 2)
    assert both.verdict == "uninformative: both arms at chance"
    assert judged(near, BASE, flags=("at chance", None)).verdict == VERDICT_NONE  # one flag: no
    far = judged(BETTER_BY, BASE, flags=("at ceiling",) * 2)
    assert far.delta_mean < -far.mde and far.verdict == VERDICT_BETTER  # detectable: judged


def test_a_family_whose_holm_floor_is_not_below_alpha_cannot_reach_it():
    assert holm_floor(6) == 2 / 64 and holm_floor(6, 2) == 4 / 64 and holm_floor(2, 3) == 1.0
    assert judged(BETTER_BY, BASE, holm_over=1).verdict == VERDICT_BETTER
    assert judged(BETTER_BY, BASE, holm_over=2).verdict == VERDICT_UNREACHABLE  # 2 · 2/64 ≥ 0.05
    few = judged(BETTER_BY[:3], BASE[:3])
    assert few.p_value == 0.25 and few.verdict == VERDICT_UNREACHABLE


def test_a_family_is_holm_adjusted_and_named_by_each_role():
    family = judge_family(
        {"x": (BETTER_BY, BASE), "y": (BASE, BETTER_BY)},
        direction="lower",
        min_effect=None,
        roles=dict(x="idea", y="baseline"),
        flags=dict(x=NO_FLAGS, y=NO_FLAGS),
    )
    assert family["x"].p_holm == family["y"].p_holm == 4 / 64
    assert family["x"].verdict == family["y"].verdict == VERDICT_UNREACHABLE  # 6 seeds, 2 tests
    assert judge_family({}, direction="lower", min_effect=None, roles={}, flags={}) == {}


@pytest.mark.parametrize(
    ("values", "flag"),
    [
        ([2.49, 2.50, 2.51, 2.50, 2.49, 2.50], "at chance"),  # within 5% of the range of chance
        ([2.7, 2.8, 2.6, 2.9, 2.7, 2.8], "at chance"),  # worse than chance counts as at chance
        ([0.001, 0.002, 0.0, 0.001, 0.002, 0.001], "at ceiling"),  # within 0.5% of the range
        ([0.012, 0.011, 0.012, 0.011, 0.012, 0.011], None),  # in the band but off it by > 2 sds
        ([0.5, 0.52, 0.48, 0.51, 0.49, 0.5], None),
    ],
)
def test_the_floor_and_ceiling_bands(values, flag):
    assert bound_flag(values, chance=2.5, ceiling=0.0, direction="lower") == flag


def test_the_bands_without_a_ceiling_or_chance():
    assert bound_flag([2.5, 2.5], chance=2.5, ceiling=None, direction="lower") == "at chance"
    assert bound_flag([0.0, 0.0], chance=2.5, ceiling=None, direction="lower") is None  # no ceiling
    assert bound_flag([2.5, 2.5], chance=None, ceiling=0.0, direction="lower") is None
    below = bound_flag([0.4, 0.45], chance=0.5, ceiling=1.0, direction="higher")
    assert below == "at chance"  # below chance, where higher is better


def test_an_ablation_of_a_cap_that_never_bound_is_untestable():
    result = judged(BETTER_BY, BASE)
    inactive = dict(observed_max_factor_singular=0.9, predicted_factor_bound=1.0)
    assert ablation_verdict(result, inactive).verdict == VERDICT_CAP_INACTIVE
    assert ablation_verdict(result, dict(inactive, observed_max_factor_singular=0.985)) == result
    assert ablation_verdict(result, None) == ablation_verdict(result, {"error": "x"}) == result


def test_min_effect_reads_a_percentage_or_the_metric_s_units():
    assert MinEffect.parse("2.5%") == MinEffect(0.025, relative=True)
    assert MinEffect.parse("0.01").spelled == "0.01"
    with pytest.raises(ValueError, match="min effect 'big'; expected a number"):
        MinEffect.parse("big")


def transfer_report(idea_at_16: list[float], base_at_16: list[float]):
    """The example study (six seeds, one rate), its idea and matched baseline also tested at 16."""
    study = dataclasses.replace(
        report_example.study(),
        models=("mix", "base"),
        eval_grids=("16",),
        budget=dataclasses.replace(report_example.BUDGET, lrs=(1e-3,)),
    )
    rows = {}
    for model, at_16 in (("mix", idea_at_16), ("base", base_at_16)):
        for index, (seed, value) in enumerate(zip(study.comparison_seeds, at_16)):
            trained = report_example.ARMS[model][1][index]
            row = report_example._row(study, model, 1e-3, seed, trained, index)
            transfer = {"16": dict(status="ok", test_metric=value, adapted="regrid")}
            row = dataclasses.replace(row, extras=dict(row.extras, transfer=transfer))
            rows[row.key] = row
    return study_report(study.to_dict(), rows, where="test")


def test_a_transfer_comparison_with_identical_arms_reads_identical():
    same = transfer_report(BASE, BASE).transfer.grids[0].comparison
    assert same.family == "transfer" and same.verdict == VERDICT_IDENTICAL


def test_a_negligible_transfer_difference_reads_negligible():
    tiny = transfer_report([value - 1e-5 for value in BASE], BASE).transfer.grids[0].comparison
    assert tiny.result.p_value == 2 / 64 and tiny.verdict == VERDICT_BETTER_NEGLIGIBLE
    assert tiny.result.min_effect == pytest.approx(0.01)  # 1% of the baseline's mean at 16
    clear = transfer_report(BETTER_BY, BASE).transfer.grids[0].comparison
    assert clear.verdict == VERDICT_BETTER and clear.a_better
