"""The report's figures, read from their artists (not their pixels): ties within the documented
tolerance are grey, every model has its own colour and line style and every seed its marker, axes
name their split and loss axes are linear with plain ticks, chance and ceiling are drawn where
declared and test-split references only on test panels, each paired panel states Δ with its
interval, legends sit outside the data, and a panel without data says why."""

import dataclasses

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba

from gridmix.report import plots
from gridmix.report.build import build_report
from gridmix.report.format import fmt
from gridmix.report.reference_lines import interval
from gridmix.study.ledger import Ledger
from tests import report_example


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    with Ledger(report_example.fill(tmp_path_factory.mktemp("study")), create=False) as ledger:
        return build_report(ledger)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def panel(fig, title_start: str):
    return next(ax for ax in fig.axes if ax.get_title().startswith(title_start))


def seed_lines(ax) -> dict[str, object]:
    return {
        line.get_gid(): line
        for line in ax.get_lines()
        if (line.get_gid() or "").startswith("seed ")
    }


def test_a_difference_within_a_tenth_of_the_seed_spread_is_a_grey_tie(report):
    base = report.arms["base"]
    nearly = list(report.idea_arm.per_seed)
    nearly[0] = base.per_seed[0] - 3.9e-7  # "better" by a rounding error on seed 0
    # worse by more than the tolerance on seed 1 (checked below)
    nearly[1] = base.per_seed[1] + 0.02
    idea = dataclasses.replace(report.idea_arm, per_seed=tuple(nearly))
    tied = dataclasses.replace(report, arms={**report.arms, report.idea: idea})
    lines = seed_lines(panel(plots.figure_paired(tied), "base"))
    a, b = np.array(nearly), np.array(base.per_seed)
    # independently: a tenth of the larger arm's spread (ddof=0)
    tolerance = 0.1 * max(np.std(a), np.std(b))
    assert plots.TIE_FRACTION == 0.1 and plots.tie_tolerance(list(a), list(b)) == pytest.approx(
        tolerance
    )
    assert 3.9e-7 < tolerance < 0.02
    for seed, (x, y) in enumerate(zip(a, b)):
        expected = plots.TIE if abs(x - y) <= tolerance else plots.BETTER if x < y else plots.WORSE
        assert to_rgba(lines[f"seed {seed}"].get_color()) == to_rgba(expected), seed
    # not green: -3.9e-07 is no win
    assert to_rgba(lines["seed 0"].get_color()) == to_rgba(plots.TIE)
    assert to_rgba(lines["seed 1"].get_color()) == to_rgba(plots.WORSE)
    # one marker per seed
    assert len({line.get_marker() for line in lines.values()}) == len(lines) == 6


def test_every_model_has_its_own_colour_and_line_style_and_every_seed_its_marker(report):
    fig = plots.figure_curves(report)
    lines = [
        line
        for ax in fig.axes
        for line in ax.get_lines()
        if (line.get_gid() or "").startswith("model ")
    ]
    by_model: dict[str, set] = {}
    for line in lines:
        _, model, _, seed = line.get_gid().split(" ")
        by_model.setdefault(model, set()).add(
            (
                to_rgba(line.get_color()),
                line.get_linestyle(),
                line.get_linewidth(),
                line.get_zorder(),
            )
        )
        assert line.get_marker() == plots.seed_marker(report.comparison_seeds.index(int(seed)))
    assert list(by_model) == list(report.arms) and all(
        len(styles) == 1 for styles in by_model.values()
    )
    styles = [next(iter(s)) for s in by_model.values()]
    # none shares colour and style
    assert len({(colour, style) for colour, style, _, _ in styles}) == len(styles)
    widths, zorders = [w for _, _, w, _ in styles], [z for _, _, _, z in styles]
    # widest below: none hides another
    assert widths == sorted(widths, reverse=True) and zorders == sorted(zorders)
    assert len(set(widths)) == len(widths)
    sweep = {
        line.get_gid(): line
        for line in plots.figure_sweep(report).axes[0].get_lines()
        if line.get_gid()
    }
    assert [
        (to_rgba(sweep[f"model {m}"].get_color()), sweep[f"model {m}"].get_linestyle())
        for m in report.arms
        # the same style per model in every figure
    ] == [(colour, style) for colour, style, _, _ in styles]


def test_axes_name_their_split_and_losses_are_linear_with_plain_ticks(report):
    fig = plots.figure_curves(report)
    loss_ax, val_ax = fig.axes[:2]
    assert (
        loss_ax.get_yscale() == "linear" and loss_ax.get_ylabel() == "training loss (train split)"
    )
    # the metric is "test MSE": never "validation test MSE"
    assert val_ax.get_ylabel() == "MSE (validation split)"
    fig.canvas.draw()
    for ax in (loss_ax, val_ax):
        labels = [t.get_text() for t in ax.get_yticklabels()] + [
            ax.yaxis.get_offset_text().get_text()
        ]
        assert all("×" not in text and "e" not in text for text in labels), labels
        assert ax.yaxis.get_offset_text().get_text() == ""
    assert plots.figure_sweep(report).axes[0].get_ylabel() == "MSE (validation split)"
    assert panel(plots.figure_paired(report), "base").get_ylabel() == "MSE (test split)"
    assert plots.split_label("answer accuracy", "test") == "answer accuracy (test split)"


def bound_labels(ax) -> list[str]:
    return [line.get_label() for line in ax.get_lines() if line.get_gid() == "bound"]


def test_chance_and_ceiling_where_declared_and_test_references_only_on_test_panels(report):
    assert (report.chance, report.ceiling) == (2.5, 0.0)
    paired = plots.figure_paired(report)
    # its values sit at chance 2.5, the idea's near 0.5: both lines within range
    nomix = panel(paired, "nomix")
    assert {"chance 2.5", "ceiling 0", "naive persistence (test split) 0.58"} <= set(
        bound_labels(nomix)
    )
    # 0.48–0.64: chance 2.5 and ceiling 0 are far off the axis, and named below it
    base = panel(paired, "base")
    assert "naive persistence (test split) 0.58" in bound_labels(base)
    assert "off the axis: chance 2.5 ↑, ceiling 0 ↓" in base.get_xlabel()
    val_ax = plots.figure_curves(report).axes[1]
    assert "chance 2.5" in bound_labels(val_ax) and not any(
        "naive" in label for label in bound_labels(val_ax)
    )
    sweep = plots.figure_sweep(report).axes[0]
    assert not any(
        "naive" in label for label in bound_labels(sweep)
    ) and "chance 2.5" in bound_labels(sweep)
    without = dataclasses.replace(report, chance=None, ceiling=None)
    labels = bound_labels(plots.figure_curves(without).axes[1])
    assert not any(label.startswith(("chance", "ceiling")) for label in labels)


def test_a_long_off_axis_note_stays_under_its_own_panel(report):
    many = {f"reference number {i}": 100.0 + i for i in range(6)}  # all far above the data
    values = dict((report.references or {}).get("values") or {}, **many)
    crowded = dataclasses.replace(report, references=dict(report.references or {}, values=values))
    fig = plots.figure_paired(crowded)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = sorted((ax for ax in fig.axes if ax.get_title()), key=lambda ax: ax.get_position().x0)
    # a label may spread past its axes, but not into the next panel's
    for left, right in zip(axes, axes[1:]):
        label = left.xaxis.label.get_window_extent(renderer)
        assert label.x1 <= right.get_window_extent(renderer).x0, left.get_xlabel()
    assert axes[0].xaxis.label.get_window_extent(renderer).x0 >= 0  # nor off the figure's left edge
    assert "reference number 5" in axes[0].get_xlabel()


@pytest.mark.parametrize("bounds", [None, (-1.0, 2.0), (None, None)])
def test_each_paired_panel_states_the_difference_with_its_interval(report, bounds):
    if bounds is not None:  # another sign-flip interval, or none: too few pairs bound it

        def widened(comparison):
            result = dataclasses.replace(
                comparison.result, signflip_ci_low=bounds[0], signflip_ci_high=bounds[1]
            )
            return dataclasses.replace(comparison, result=result)

        comparisons = {name: widened(comparison) for name, comparison in report.comparisons.items()}
        report = dataclasses.replace(
            report,
            comparisons=comparisons,
            arms={
                name: dataclasses.replace(arm, comparison=comparisons.get(name))
                for name, arm in report.arms.items()
            },
        )
    fig = plots.figure_paired(report)
    for name in report.others:
        result = report.comparison_with(name).result
        label = panel(fig, name).get_xlabel()
        assert f"Δ = idea − {name} = {fmt(result.delta_mean)}" in label
        # the report's words, "unbounded" included
        assert f"95% sign-flip interval {interval(result)}," in label
        assert "t-interval" not in label
        # the interval and the p come from the same test
        assert f"sign-flip p = {fmt(result.p_value)}" in label


@pytest.mark.parametrize("draw", [plots.figure_paired, plots.figure_curves, plots.figure_sweep])
def test_legends_sit_outside_every_panel(report, draw):
    fig = draw(report)
    fig.canvas.draw()
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    for legend in legends:
        box = legend.get_window_extent()
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent()), (draw.__name__, ax.get_title())


def sweep_document(chances: list[float]) -> dict:
    """A two-panel sweep (grid × vocab) of two models, its chance level per point as given."""
    points = []
    for (grid, vocab), chance in zip([(g, v) for v in (16, 32) for g in ("32", "64")], chances):
        arms = {
            name: dict(mean=base + 0.01 * len(grid), std=0.01, n=2, per_seed=[base, base + 0.02])
            for name, base in (("idea", 0.3), ("attention", 0.9))
        }
        points.append(
            dict(
                values={"grid": grid, "vocab": vocab},
                arms=arms,
                outcome="worse",
                chance=chance,
                ceiling=1.0,
            )
        )
    return dict(
        track="mqar",
        metric="answer accuracy",
        metric_direction="higher is better",
        baseline="attention",
        over=[["grid", ["32", "64"]], ["vocab", [16, 32]]],
        points=points,
    )


def test_a_sweep_plot_keeps_its_legend_outside_and_draws_chance_through_the_points():
    fig = plots.figure_sweep_points(sweep_document([1 / 16, 1 / 16, 1 / 32, 1 / 32]))
    fig.canvas.draw()
    panels = [ax for ax in fig.axes if ax.get_xlabel()]
    assert len(panels) == 2
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert len(legends) == 1
    for ax in panels:
        assert not legends[0].get_window_extent().overlaps(ax.get_window_extent()), ax.get_title()
    styles = plots.model_styles(["idea", "attention"])
    for ax, chance in zip(panels, (1 / 16, 1 / 32)):
        lines = {
            container.get_label(): container.lines[0] for container in ax.containers
        }  # errorbars
        # as in every other figure
        assert to_rgba(lines["idea"].get_color()) == to_rgba(styles["idea"]["color"])
        assert to_rgba(lines["attention"].get_color()) == to_rgba(styles["attention"]["color"])
        chance_line = next(line for line in ax.get_lines() if line.get_gid() == "chance")
        assert list(chance_line.get_ydata()) == [chance, chance]
        assert chance_line.get_label() == f"chance {fmt(chance)}"
    varying = plots.figure_sweep_points(sweep_document([1 / 16, 1 / 32, 1 / 16, 1 / 32]))
    chance_line = next(line for line in varying.axes[0].get_lines() if line.get_gid() == "chance")
    assert chance_line.get_label() == "chance (per point)"


def test_a_failed_arm_gets_a_note_in_place_of_an_empty_panel(report):
    arm = report.arms["uncapped"]
    failed = dataclasses.replace(
        arm,
        per_seed_status=("failed",) * 6,
        per_seed=(),
        mean=None,
        std=None,
        train_loss=((),) * 6,
        val=((),) * 6,
    )
    broken = dataclasses.replace(report, arms={**report.arms, "uncapped": failed})
    notes = [
        t.get_text()
        for t in panel(plots.figure_paired(broken), "uncapped").texts
        if t.get_gid() == "note"
    ]
    assert notes == ["no seed where both finished\n(mix ok, uncapped failed)"]
    curves = plots.figure_curves(broken)
    assert "no finished run: uncapped" in [t.get_text() for t in curves.legends[0].get_texts()]
    nothing = dataclasses.replace(
        broken,
        arms={
            name: dataclasses.replace(a, train_loss=((),) * 6, val=((),) * 6)
            for name, a in broken.arms.items()
        },
    )
    assert all(
        any(t.get_gid() == "note" for t in ax.texts) for ax in plots.figure_curves(nothing).axes
    )


def scaling(grids: int, *, memory: bool) -> dict:
    tokens = [64, 256, 1024][:grids]
    points = [
        dict(
            model=model,
            grid=str(n),
            tokens=n,
            params=1000,
            gflops=0.1 * n / 64,
            time_ms=float(n) / 10,
            peak_mb=(10.0 + n / 100) if memory else None,
            skipped=None,
            notes=[],
        )
        for model in ("mix", "attn")
        for n in tokens
    ]
    fits = [
        dict(
            model=model,
            quantity=q,
            exponent=1.0,
            intercept=0.0,
            r2=None if grids < 3 else 1.0,
            points=grids,
            tail_exponent=1.0 if q != "memory" or memory else None,
            tail_points=2,
        )
        for model in ("mix", "attn")
        for q in ("time", "flops", "memory")
    ]
    return dict(
        track="toy",
        device="cpu",
        threads=1,
        batch=4,
        repeats=2,
        warmup=1,
        grids=[str(n) for n in tokens],
        models=["mix", "attn"],
        points=points,
        fits=fits,
    )


def test_scaling_memory_panel_without_data_says_so_and_no_slope_is_promised_from_two_grids():
    fig = plots.figure_scaling(scaling(2, memory=False))
    time_ax, flops_ax, memory_ax = fig.axes
    assert [t.get_text().split("\n")[0] for t in memory_ax.texts if t.get_gid() == "note"] == [
        "peak memory (above the interpreter): no point measured"
    ]
    labels = [t.get_text() for t in time_ax.get_legend().get_texts()]
    assert "slope" not in fig.get_suptitle() and not any("slope" in label for label in labels)
    three = plots.figure_scaling(scaling(3, memory=True))
    assert "slope" in three.get_suptitle()
    assert "mix (slope 1.00)" in [t.get_text() for t in three.axes[0].get_legend().get_texts()]
    assert not any(t.get_gid() == "note" for ax in three.axes for t in ax.texts)
    fig.canvas.draw()
    assert [t.get_text() for t in time_ax.get_xticklabels()] == [
        "64",
        "256",
    ]  # plain numbers, never 2.56×10²


def test_spectra_give_every_seed_its_own_style():
    axis = dict(kind="symmetric", length=4, singular_values=[[0.9, 0.5, 0.1, 0.0]])
    signature = dict(layers=[dict(name="blocks.0.attn", axes=[axis, axis])])
    mechanism = dict(
        predicted_factor_bound=1.0,
        confirmed=True,
        certified_operator_bound=0.81,
        per_seed=[dict(signature, seed=0), dict(signature, seed=1)],
    )  # the same spectrum on both seeds
    fig = plots.figure_spectra(mechanism)
    lines = {line.get_gid(): line for line in fig.axes[0].get_lines() if line.get_gid()}
    zero, one = lines["seed 0"], lines["seed 1"]
    assert (to_rgba(zero.get_color()), zero.get_linestyle(), zero.get_marker()) != (
        to_rgba(one.get_color()),
        one.get_linestyle(),
        one.get_marker(),
    )
    # seed 0 shows as a rim
    assert zero.get_linewidth() > one.get_linewidth() and zero.get_zorder() < one.get_zorder()


def with_transfer(report):
    """The example report tested on grid 16 too, every model near its trained-grid metric."""
    from gridmix.report.types import Transfer, TransferArm, TransferGrid

    arms = {
        name: TransferArm(
            name=name,
            statuses=("ok",) * len(arm.per_seed),
            per_seed=tuple(v + 0.01 for v in arm.per_seed),
            mean=arm.mean + 0.01,
            std=arm.std,
        )
        for name, arm in report.arms.items()
    }
    point = TransferGrid(grid="16", arms=arms, comparison=None)
    return dataclasses.replace(report, transfer=Transfer(trained_grid="8", grids=(point,)))


def test_transfer_draws_the_chance_line(report):
    """A model at chance must not read as a gain: the chance level is drawn (the control sits at
    it in the example)."""
    fig = plots.figure_transfer(with_transfer(report))
    bounds = [line for line in fig.axes[0].get_lines() if line.get_gid() == "bound"]
    assert any(
        line.get_label().startswith("chance") and line.get_ydata()[0] == report.chance
        for line in bounds
    )


def test_paired_seeds_of_two_arms_at_chance_are_grey_not_wins_or_losses(report):
    """When the verdict is "both arms at chance", no seed's difference is a win or a loss."""
    from gridmix.analysis.verdicts import UNINFORMATIVE

    comp = report.comparison_with("base")
    verdict = UNINFORMATIVE.format(flag="at chance")
    chance = dataclasses.replace(
        comp, verdict=verdict, result=dataclasses.replace(comp.result, verdict=verdict)
    )
    base = dataclasses.replace(report.arms["base"], comparison=chance)
    both = dataclasses.replace(
        report,
        arms={**report.arms, "base": base},
        comparisons={**report.comparisons, "base": chance},
    )
    lines = seed_lines(panel(plots.figure_paired(both), "base"))
    assert lines and {to_rgba(line.get_color()) for line in lines.values()} == {to_rgba(plots.TIE)}


def test_every_role_has_one_colour_in_every_report(report):
    """The control is brown whatever the models before it: a colour is a role, not a position."""
    lines = [
        line
        for ax in plots.figure_curves(report).axes
        for line in ax.get_lines()
        if (line.get_gid() or "").startswith("model ")
    ]
    for line in lines:
        role = report.arms[line.get_gid().split(" ")[1]].role
        assert to_rgba(line.get_color()) == to_rgba(plots.ROLE_COLOURS[role])
    roles = {"mix": "idea", "base": "baseline", "wide": "baseline", "nomix": "control"}
    two = plots.model_styles(["mix", "nomix"], roles)
    four = plots.model_styles(["mix", "base", "wide", "nomix"], roles)
    assert two["nomix"]["color"] == four["nomix"]["color"] == plots.ROLE_COLOURS["control"]
    assert four["base"]["color"] == four["wide"]["color"]
    assert four["base"]["linestyle"] != four["wide"]["linestyle"]  # one role, told apart by style


def test_the_scaling_plot_names_the_grids_it_skipped():
    data = dict(scaling(3, memory=True), excluded_grids={"2": "patch 4 does not divide 2"})
    title = plots.figure_scaling(data).get_suptitle()
    assert "not measured, the track does not run them: 2 (patch 4 does not divide 2)" in title


def test_the_memory_axis_does_not_zoom_into_a_narrow_range():
    """8.5 and 9.3 MB are nearly equal: the log axis spans at least a decade, around the data."""
    data = scaling(3, memory=True)
    for point, mb in zip(data["points"], (8.5, 9.0, 9.3, 8.6, 8.9, 9.2)):
        point["peak_mb"] = mb
    memory_ax = plots.figure_scaling(data).axes[2]
    low, high = memory_ax.get_ylim()
    assert high / low >= 10 and low < 8.5 and high > 9.3
    one = dict(data, points=[p for p in data["points"] if p["tokens"] == 64])
    low, high = plots.figure_scaling(one).axes[2].get_ylim()  # a single grid too
    assert high / low >= 10


def test_the_spectra_legend_title_names_its_entries():
    axis = dict(kind="symmetric", length=4, singular_values=[[0.9, 0.5, 0.1, 0.0]])
    signature = dict(layers=[dict(name="blocks.0.attn", axes=[axis])])
    mechanism = dict(
        predicted_factor_bound=1.0,
        confirmed=True,
        certified_operator_bound=0.81,
        per_seed=[dict(signature, seed=0), dict(signature, seed=1)],
    )
    legend = plots.figure_spectra(mechanism).legends[0]
    entries = [text.get_text() for text in legend.get_texts()]
    assert entries[:2] == ["seed 0", "seed 1"]
    assert legend.get_title().get_text().startswith("seeds")
