"""Parity audit: ratios and warnings are right, and width matching reaches a baseline's parameter
count."""

import dataclasses

import pytest

from gridmix import Grid
from gridmix.analysis.measure import count_flops
from gridmix.analysis.parity import (
    WidthMatch,
    audit_parity,
    count_parameters,
    match_parameters,
    parity_report,
)
from gridmix.analysis.scaling import prepare
from tests.test_scaling import TOY

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


GRID = Grid((16, 16))


def test_ratios_are_the_idea_over_each_model_and_fewer_flops_never_warn():
    parity = audit_parity(TOY, GRID, models=["toy-attention", "toy-small-only"], batch=4)
    rows = {row.model: row for row in parity.rows}
    assert list(rows) == ["toy-mixer", "toy-attention", "toy-small-only"]
    idea, attention = rows["toy-mixer"], rows["toy-attention"]
    for row in (idea, attention):  # independent recomputation on the real batch
        model, inputs, targets = prepare(
            TOY, TOY.model(row.model), GRID, batch=4, seed=0, device="cpu"
        )
        assert row.params == count_parameters(model)
        assert (
            row.flops
            == count_flops(model, inputs, loss=lambda out, t=targets: TOY.loss(out, t)).total
        )
    assert idea.params_ratio == idea.flops_ratio == 1.0 and idea.warning is None
    assert attention.params_ratio == pytest.approx(idea.params / attention.params)
    assert attention.flops_ratio == pytest.approx(idea.flops / attention.flops)
    # Attention at 256 tokens costs far more FLOPs than the mixer: the idea's saving, never a
    # warning; the parameter counts are within 10% of each other, so nothing warns.
    assert TOY.matched_baseline == "toy-attention" and attention.flops_ratio < 0.5
    assert (
        abs(attention.params_ratio - 1) < 0.1
        and attention.warning is None
        and parity.warnings == []
    )
    assert rows["toy-small-only"].skipped == "unsupported: only up to 64 tokens; got 256"
    assert parity.matched_baseline == "toy-attention"


def test_the_matched_baselines_parameter_count_off_by_more_than_ten_percent_is_the_one_warning():
    wide = {
        "toy-mixer": {"mlp_ratio": 6.0}
    }  # three times the MLP: more parameters than its matched baseline
    parity = audit_parity(TOY, GRID, models=["toy-attention"], batch=4, model_kwargs=wide)
    attention = {row.model: row for row in parity.rows}["toy-attention"]
    idea_params = count_parameters(TOY.idea.build(GRID, mlp_ratio=6.0))
    assert (
        attention.params_ratio == pytest.approx(idea_params / attention.params)
        and attention.params_ratio > 1.1
    )
    assert attention.warning.startswith(
        f"toy-mixer has {attention.params_ratio:.4g} times the parameters of its "
        "matched baseline toy-attention (beyond ±10%)"
    )
    assert "FLOPs" not in attention.warning and parity.warnings == [attention.warning]
    other = dataclasses.replace(
        TOY,
        models=(
            *TOY.models,
            dataclasses.replace(TOY.model("toy-attention"), name="toy-attention-2"),
        ),
    )
    parity = audit_parity(
        other, GRID, models=["toy-attention", "toy-attention-2"], batch=4, model_kwargs=wide
    )
    rows = {row.model: row for row in parity.rows}
    # as far off, but not matched
    assert rows["toy-attention-2"].params_ratio == rows["toy-attention"].params_ratio
    assert rows["toy-attention-2"].warning is None and parity.warnings == [
        rows["toy-attention"].warning
    ]


def test_no_warning_within_tolerance_and_report_is_plain_data():
    twin = dataclasses.replace(
        TOY,
        models=(
            TOY.model("toy-mixer"),
            dataclasses.replace(TOY.model("toy-mixer"), name="twin", role="baseline"),
        ),
        matched_baseline="twin",
    )
    report = parity_report(twin, "8x8", batch=2)
    assert report["warnings"] == [] and [r["params_ratio"] for r in report["rows"]] == [1.0, 1.0]
    with pytest.raises(ValueError, match="tolerance=1.5"):
        audit_parity(TOY, GRID, tolerance=1.5)


def test_match_parameters_brings_the_idea_within_two_percent_of_a_baseline():
    target = count_parameters(TOY.model("toy-attention").build(GRID))
    match = match_parameters(TOY.idea, GRID, target)
    assert match.kwarg == "mlp_ratio" and match.rel_error <= 0.02
    assert count_parameters(TOY.idea.build(GRID, mlp_ratio=match.value)) == match.params
    assert abs(match.params - target) <= 0.02 * target
    smaller = match_parameters(TOY.idea, GRID, count_parameters(TOY.idea.build(GRID)) - 300)
    assert smaller.value < 2.0


def test_a_width_match_derives_its_relative_error_and_checks_its_counts():
    assert WidthMatch("mlp_ratio", 1.5, params=98, target=100).rel_error == pytest.approx(0.02)
    assert WidthMatch("mlp_ratio", 1.5, params=103, target=100).rel_error == pytest.approx(0.03)
    with pytest.raises(ValueError, match="params=10, target=0; expected params >= 0, target >= 1"):
        WidthMatch("mlp_ratio", 1.5, params=10, target=0)


@pytest.mark.filterwarnings(
    "ignore:Initializing zero-element tensors"
)  # mlp_ratio halved to 0 hidden units
def test_match_parameters_needs_a_width_argument_and_a_reachable_target():
    with pytest.raises(ValueError, match="no width_kwarg"):
        match_parameters(TOY.model("toy-attention"), GRID, 1000)
    with pytest.raises(ValueError, match="cannot bring 'toy-mixer' within 2% of 10 parameters"):
        match_parameters(TOY.idea, GRID, 10, max_builds=12)
