"""The records' dicts: :func:`gridmix.core.records.pick` and the JSON keys, in order, of the
``to_dict`` methods and ledger rows built with it."""

import dataclasses

from gridmix.analysis.measure import Flops
from gridmix.analysis.parity import Parity, ParityRow
from gridmix.analysis.scaling import Fit, ScalingPoint, ScalingResult
from gridmix.core.records import pick
from gridmix.report.types import Power, PrimaryPower, SecondaryPower


def test_pick_gives_fields_and_properties_in_the_order_named_values_uncopied():
    flops = Flops(forward=2, backward=3, per_op={"mm": 5})
    picked = pick(flops, "total", "per_op", "forward")
    assert list(picked.items()) == [("total", 5), ("per_op", {"mm": 5}), ("forward", 2)]
    assert picked["per_op"] is flops.per_op
    assert pick(flops) == {}


def test_flops_keys_put_the_total_after_forward_and_backward():
    flops = Flops(forward=2, backward=3, per_op={"mm": 5}, uncounted={"svd": 1})
    assert list(flops.to_dict().items()) == [
        ("forward", 2),
        ("backward", 3),
        ("total", 5),
        ("per_op", {"mm": 5}),
        ("uncounted", {"svd": 1}),
    ]


def test_parity_keys_put_the_matched_baseline_before_the_rows_and_warnings():
    row = ParityRow("idea", "idea", 10, 20, 1.0, 1.0, warning="off")
    parity = Parity("image", "8x8", 4, "idea", 0.1, [row], matched_baseline="vit")
    data = parity.to_dict()
    assert list(data) == [
        "track",
        "grid",
        "batch",
        "idea",
        "tolerance",
        "matched_baseline",
        "rows",
        "warnings",
    ]
    assert data["rows"] == [dataclasses.asdict(row)] and data["warnings"] == ["off"]


def test_scaling_keys_put_the_machine_before_the_points_and_fits():
    point = ScalingPoint(model="vit", grid="8x8", tokens=64)
    fit = Fit("vit", "time", None, None, None, 1, None, 0)
    result = ScalingResult(
        "image", "cpu", 2, 4, 3, 1, ["8x8"], ["vit"], [point], [fit], load_average=(0.5, None)
    )
    data = result.to_dict()
    assert list(data) == [
        "track",
        "device",
        "threads",
        "batch",
        "repeats",
        "warmup",
        "grids",
        "models",
        "load_average",
        "cpu_count",
        "cpu_steal",
        "roles",
        "excluded_grids",
        "points",
        "fits",
    ]
    assert data["load_average"] == [0.5, None] and data["points"] == [point.to_dict()]
    assert data["fits"] == [fit.to_dict()] and data["threads"] == 2


def test_power_keys_leave_the_secondary_family_out_only_when_there_is_none():
    primary = PrimaryPower(min_p=0.01, seeds_needed=6, reachable=True)
    alone = Power(alpha=0.05, n_seeds=8, primary=primary, underpowered_run=False)
    assert alone.to_dict() == dict(
        alpha=0.05,
        n_seeds=8,
        primary=dict(min_p=0.01, seeds_needed=6, reachable=True),
        underpowered_run=False,
    )
    secondary = SecondaryPower(comparisons=2, min_p_holm=0.08, seeds_needed=7, reachable=False)
    both = dataclasses.replace(alone, secondary=secondary).to_dict()
    assert list(both) == ["alpha", "n_seeds", "primary", "underpowered_run", "secondary"]
    assert list(both["secondary"].items()) == [
        ("comparisons", 2),
        ("min_p_holm", 0.08),
        ("seeds_needed", 7),
        ("reachable", False),
    ]
    assert Power.from_dict(both) == dataclasses.replace(alone, secondary=secondary)
