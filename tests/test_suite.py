"""``gridmix suite``: the aggregate's statistics match hand computations, a track's ladder is read
as ``gridmix tracks`` shows it, a smoke suite plans the idea, attention and exactly the baselines
named (on the default set's mqar and sequence too), the default set leaves out the tracks a mixer
named cannot serve and says so, a smoke suite on a tiny laddered track writes its profile and reuses
its ledgers when run again, and bad input is one line with exit status 2."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from gridmix.analysis.verdicts import VERDICT_IDENTICAL, VERDICT_UNREACHABLE
from gridmix.cli import app
from gridmix.orchestrate.suiting import DEFAULT_TRACKS, default_tracks, plan_suite, smallest_grid
from gridmix.report.suite_report import TrackRuns, normalise, reach, seed_interval
from gridmix.report.suite_stats import iqm, probability_of_improvement, stratified_bootstrap
from gridmix.tracks import Track
from gridmix.tracks.budget import DataSizes
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track

RUNGS = {"noise-0": 0.0, "noise-1": 1.0, "noise-4": 4.0}  # rung → noise added to the targets


def make_laddered(difficulty: str = "noise-0", dim: int = 8) -> Track:
    """The fake track with a difficulty ladder: noise on the targets, chance 1 and ceiling 0 (MSE,
    lower is better); grids of 4 tokens or more."""

    def make_data(grid, seed, sizes):
        data = fake_track.make_data(grid, seed, sizes)
        gen = torch.Generator().manual_seed(seed + 7)
        noisy = [
            dataclasses.replace(
                split,
                targets=split.targets
                + RUNGS[difficulty] * torch.randn(split.targets.shape, generator=gen),
            )
            for split in (data.train, data.val, data.test)
        ]
        return type(data)(*noisy)

    base = fake_track.make_track(dim)
    return dataclasses.replace(
        base,
        name="laddered",
        description=f"fake regression with noise; ladder: {' < '.join(RUNGS)}",
        make_data=make_data,
        models=base.models[:2],
        chance=1.0,
        ceiling=0.0,
        supports=lambda grid: None if grid[0] >= 4 else f"needs 4 tokens; got {grid}",
        settings={"difficulty": difficulty, "dim": dim},
        rebuild=make_laddered,
        ladder=tuple(RUNGS),
    )


class Plugin:
    @hookimpl
    def gridmix_tracks(self):
        return [make_laddered()]


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[Plugin()], refresh=True)
    load_registry(refresh=True)


# --- the statistics against hand computations


def test_the_iqm_is_the_mean_of_the_middle_half():
    assert iqm([1, 2, 3, 4]) == 2.5  # n=4: one cut from each end → (2 + 3) / 2
    assert iqm([10, 0, 1, 2, 3, 100, 4, 5]) == (2 + 3 + 4 + 5) / 4  # sorted 0 1 | 2 3 4 5 | 10 100
    assert iqm([7, 1, 3]) == pytest.approx(11 / 3)  # n=3: ⌊3/4⌋ = 0 cut
    assert iqm([1, 2, 3, 4, 5, 1000]) == pytest.approx((2 + 3 + 4 + 5) / 4)  # ⌊6/4⌋ = 1


def test_the_probability_of_improvement_counts_every_pair_ties_half():
    # stratum 1: x = (1, 3), y = (2, 3): pairs 1>2 no, 1>3 no, 3>2 yes, 3=3 half → 1.5 / 4
    # stratum 2: x = (5,), y = (4, 6): 5>4 yes, 5>6 no → 1 / 2
    got = probability_of_improvement([[1, 3], [5]], [[2, 3], [4, 6]])
    assert got == pytest.approx((1.5 / 4 + 1 / 2) / 2)
    assert probability_of_improvement([[1, 1]], [[1, 1]]) == 0.5
    with pytest.raises(ValueError, match="same number"):
        probability_of_improvement([[1]], [[1], [2]])


def test_the_stratified_bootstrap_resamples_within_each_stratum():
    # a stratum of one seed is the same in every resample; a constant stratum likewise
    value, low, high = stratified_bootstrap([[0.2], [0.4, 0.4], [0.9]], reps=50)
    assert value == low == high == pytest.approx(iqm([0.2, 0.4, 0.4, 0.9]))
    # the interval from the same draws computed by hand
    strata = [[0.0, 1.0], [0.5, 0.7, 0.9]]
    value, low, high = stratified_bootstrap(strata, reps=200, seed=3)
    rng = np.random.default_rng(3)
    draws = []
    for _ in range(200):
        pooled = [s[i] for s in strata for i in rng.integers(0, len(s), len(s))]
        pooled.sort()
        cut = len(pooled) // 4
        draws.append(np.mean(pooled[cut : len(pooled) - cut]))
    assert (low, high) == pytest.approx(tuple(np.percentile(draws, [2.5, 97.5])))
    assert value == pytest.approx(np.mean([0.5, 0.7, 0.9]))  # 0, 0.5, 0.7, 0.9, 1: one cut each end
    # the pooled draw never mixes strata: stratum sizes are kept
    assert 0.0 <= low <= value <= high <= 1.0


def test_scores_are_normalised_between_chance_and_ceiling_whichever_way_the_metric_points():
    assert normalise(0.75, 0.5, 1.0) == 0.5  # accuracy: higher is better
    assert normalise(0.25, 1.0, 0.0) == 0.75  # MSE: chance 1, ceiling 0, lower is better
    assert normalise(0.3, None, 1.0) is None
    low, high = seed_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, t(0.975, 2) = 4.302653
    assert (low, high) == pytest.approx((2 - 4.302653 / 3**0.5, 2 + 4.302653 / 3**0.5))
    assert seed_interval([1.0]) is None


def test_reach_is_the_highest_rung_up_to_which_the_mean_stays_above_the_fraction():
    rungs = [("a", [0.9, 0.7]), ("b", [0.6, 0.45]), ("c", [0.2, 0.3]), ("d", [0.9, 0.9])]
    # means 0.8, 0.525, 0.25, 0.9: above 0.5 at a and b, not at c; d does not count after c
    assert reach(rungs, 0.5) == dict(rung="b", seeds_above=1, seeds=2)
    assert reach(rungs, 0.525) == dict(rung="a", seeds_above=2, seeds=2)  # equal is not above
    assert reach([("a", [0.4, 0.9])] + rungs, 0.7) == dict(rung=None, seeds_above=None, seeds=None)
    assert reach([("a", [0.9]), ("b", None), ("c", [0.9])], 0.5)["rung"] == "a"  # missing ends it


def test_a_track_s_models_need_one_mixer_name_each():
    with pytest.raises(ValueError, match="expected one per model"):
        TrackRuns(
            track="t",
            rungs=(("r", None),),
            mixers={"a": "x", "b": "x"},
            params={},
            flops={},
            batch=1,
        )


# --- the ladder and the plan


def test_the_ladder_is_a_track_field_checked_against_its_difficulty():
    registry = load_registry()
    assert registry.track("laddered").ladder == ("noise-0", "noise-1", "noise-4")
    assert registry.track("pathfinder").ladder == ("trace-4", "trace-6", "len-6", "len-9", "len-14")
    assert registry.track("mqar").ladder == ()
    with pytest.raises(ValueError, match="expected a difficulty setting whose value is on"):
        dataclasses.replace(make_laddered(), ladder=("noise-1", "noise-4"))


def test_a_smoke_suite_trains_idea_and_attention_on_two_rungs_on_the_smallest_grid():
    sizes = load_registry().track("laddered").budget("smoke").sizes
    assert smallest_grid(make_laddered(), ("noise-0", "noise-1"), sizes, [0, 1, 1000]) == "4"
    (planned,) = plan_suite(tracks=["laddered"], budget="smoke", threads=1)
    assert planned.rungs == ("noise-0", "noise-1")
    for study in planned.studies:
        assert study.grid == "4" and study.models == ("fake-mixer", "fake-attention")


def test_a_smoke_suite_trains_exactly_the_baselines_named_and_no_other_model():
    named = dict(idea="global-filter", baselines=["s4nd", "linear-attention"])
    (planned,) = plan_suite(tracks=["recall"], budget="smoke", threads=1, **named)
    for study in planned.studies:
        assert study.models == (
            "transformer-global-filter",
            "transformer",
            "transformer-s4nd",
            "transformer-linear-attention",
        )
    (planned,) = plan_suite(tracks=["recall"], budget="smoke", threads=1, idea="concentration")
    for study in planned.studies:  # its ablation and the control stay out at smoke
        assert study.models == ("transformer-concentration", "transformer")


def test_the_default_set_holds_mqar_and_sequence_one_smoke_study_each():
    assert {"recall", "pathfinder", "copy", "occlusion", "mqar", "sequence"} == set(DEFAULT_TRACKS)
    registry = load_registry()
    for planned in plan_suite(tracks=["mqar", "sequence"], budget="smoke", threads=1):
        track = registry.track(planned.track)
        (study,) = planned.studies
        assert planned.rungs == ()
        assert sorted(study.models) == sorted([track.idea.name, track.matched_baseline])
        assert track.check_grid(study.grid).numel < track.default_grid.numel


def test_the_default_set_leaves_out_the_tracks_a_mixer_named_cannot_serve():
    assert default_tracks("concentration", ()) == (DEFAULT_TRACKS, {})
    kept, left_out = default_tracks("global-filter", ["s4nd"])
    assert kept == tuple(t for t in DEFAULT_TRACKS if t != "mqar")
    assert list(left_out) == ["mqar"] and "global-filter: " in left_out["mqar"]
    assert "not causal" in left_out["mqar"]
    with pytest.raises(ValueError, match="nosuch"):
        default_tracks("nosuch", ())


def test_a_track_left_out_of_the_default_set_is_said_on_the_console_and_in_the_profile(
    tmp_path, monkeypatch
):
    from gridmix.orchestrate import suiting

    monkeypatch.setattr(suiting, "DEFAULT_TRACKS", ("recall", "mqar"))
    result = CliRunner().invoke(
        app,
        ["suite", "--idea", "global-filter", "--budget", "smoke", "--threads", "1", "--jobs", "1"]
        + ["--out", str(tmp_path)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "track 'mqar' left out of the default set: global-filter: " in result.output
    document = json.loads((tmp_path / "suite.json").read_text())
    assert [t["track"] for t in document["tracks"]] == ["recall"]
    assert list(document["left_out"]) == ["mqar"]
    why = document["left_out"]["mqar"]
    said = f"Left out of the default tracks, a mixer named cannot serve them: mqar ({why})."
    assert said in (tmp_path / "suite.md").read_text()


# --- end to end on the command line


def suite_command(out, *more):
    return CliRunner().invoke(
        app,
        [
            "suite",
            "--tracks",
            "laddered",
            "--budget",
            "smoke",
            "--threads",
            "1",
            "--jobs",
            "1",
            "--out",
            str(out),
            *more,
        ],
        env={"COLUMNS": "200"},
    )


def training_step_flops(track: dict, document: dict) -> dict[str, int]:
    """Each model's FLOPs of one training step, counted here with torch's counter (and the formulas
    gridmix adds for kernels it misses: CPU attention, the triangular solve): forward and backward
    of the track's loss on a batch of the suite's batch size, on its smallest grid."""
    from torch.utils.flop_counter import FlopCounterMode

    from gridmix.analysis.measure import FLOP_FORMULAS

    laddered = load_registry().track("laddered")
    grid = track["rungs"][0]["grid"]
    data = laddered.make_data(laddered.check_grid(grid), 0, DataSizes(track["flops_batch"], 1, 1))
    counts = {}
    for spec in laddered.models:
        torch.manual_seed(0)
        model = spec.build(laddered.check_grid(grid)).train()
        with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as counter:
            laddered.loss(model(data.train.inputs), data.train.targets).backward()
        counts[spec.name] = counter.get_total_flops()
    return counts


def test_a_smoke_suite_writes_its_profile_and_reuses_its_ledger(tmp_path):
    result = suite_command(tmp_path)
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "suite.json").read_text())
    (track,) = document["tracks"]
    assert [rung["rung"] for rung in track["rungs"]] == ["noise-0", "noise-1"]
    for rung in track["rungs"]:
        assert set(rung["arms"]) == {"fake-mixer", "fake-attention"}
        for arm in rung["arms"].values():
            assert arm["n"] == 2 and arm["normalised"] == pytest.approx(
                [1 - v for v in arm["per_seed"]]
            )
    assert set(document["aggregate"]) == {"fake-mixer", "fake-attention"}
    assert document["aggregate"]["fake-attention"]["p_improvement"] is None
    assert set(track["params"]) == {"fake-mixer", "fake-attention"} and track["failures"] == []
    assert track["flops"] == training_step_flops(track, document)
    assert document["aggregate"]["fake-mixer"]["strata"] == 2
    for rung in track["rungs"]:  # each arm against attention, paired by seed
        idea, attention = rung["arms"]["fake-mixer"], rung["arms"]["fake-attention"]
        versus = idea["versus_attention"]
        differences = [a - b for a, b in zip(idea["per_seed"], attention["per_seed"], strict=True)]
        assert versus["delta"] == pytest.approx(sum(differences) / 2) and versus["n"] == 2
        same_sign = differences[0] * differences[1] > 0  # exact sign-flip, 4 patterns
        assert versus["p"] == pytest.approx(0.5 if same_sign else 1.0)
        # two seeds cannot reach α: no direction and no "no significant difference" is said
        assert versus["verdict"] in (VERDICT_UNREACHABLE, VERDICT_IDENTICAL) or versus[
            "verdict"
        ].startswith("uninformative"), versus["verdict"]
        assert attention["versus_attention"] is None
    markdown = (tmp_path / "suite.md").read_text()
    assert "## Reach" in markdown and "interquartile mean" in markdown
    assert (tmp_path / "suite_laddered.png").exists()
    assert (tmp_path / "laddered" / "sweep_report.json").exists()
    again = suite_command(tmp_path)
    assert again.exit_code == 0 and "done " not in again.output, again.output  # nothing retrained
    assert json.loads((tmp_path / "suite.json").read_text())["tracks"] == document["tracks"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--tracks", "nosuch"], "nosuch"),
        (["--tracks", "laddered", "--idea", "nosuch"], "nosuch"),
        (["--tracks", "laddered", "--idea", "global-filter"], "track 'laddered'"),
        (["--tracks", "laddered,laddered"], "names 'laddered' twice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, arguments, message):
    result = CliRunner().invoke(
        app,
        ["suite", "--budget", "smoke", *arguments, "--out", str(tmp_path / "out")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_an_interrupted_suite_resumes_without_retraining_to_the_same_numbers(tmp_path, monkeypatch):
    from gridmix.orchestrate import suiting
    from tests.test_sweep import Counting

    first, again, whole = Counting(stop_after=6), Counting(), Counting()
    executors = iter([first, again, whole])
    monkeypatch.setattr(suiting, "make_executor", lambda *args, **kwargs: next(executors))
    options = dict(tracks=["laddered"], budget="smoke", threads=1, jobs=1)
    with pytest.raises(KeyboardInterrupt):
        suiting.suite(out=tmp_path / "killed", **options)
    resumed = suiting.suite(out=tmp_path / "killed", **options)
    assert len(first.ran) == 6 and len(again.ran) == 16 - 6  # 2 rungs × 2 models × 4 runs
    assert not set(first.ran) & set(again.ran)
    uninterrupted = suiting.suite(out=tmp_path / "whole", **options)

    def numbers(report):
        document = report.to_dict()
        for track in document["tracks"]:
            del track["seconds"]  # wall-clock, measured
        return document

    assert numbers(resumed) == numbers(uninterrupted)


def test_rungs_choose_part_of_a_ladder_in_its_order_and_refuse_what_is_not_on_it(tmp_path):
    (planned,) = plan_suite(
        tracks=["laddered"], rungs={"laddered": ("noise-4", "noise-0")}, budget="smoke", threads=1
    )
    assert planned.rungs == ("noise-0", "noise-4")
    assert [p.values["difficulty"] for p in planned.planned.points] == ["noise-0", "noise-4"]
    with pytest.raises(ValueError, match="expected distinct rungs of its ladder noise-0, noise-1"):
        plan_suite(tracks=["laddered"], rungs={"laddered": ("noise-2",)}, budget="smoke")
    with pytest.raises(ValueError, match="expected tracks of the suite"):
        plan_suite(tracks=["laddered"], rungs={"recall": ("pairs-1",)}, budget="smoke")
    for rungs in (["laddered=noise-9"], ["laddered"], ["recall=pairs-1"]):
        result = CliRunner().invoke(
            app,
            ["suite", "--tracks", "laddered", "--budget", "smoke", "--out", str(tmp_path / "out")]
            + [part for rung in rungs for part in ("--rungs", rung)],
            env={"COLUMNS": "200"},
        )
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1 and "--rungs" in result.output
    assert not (tmp_path / "out").exists()


def test_one_rung_of_a_ladder_is_one_study_at_that_rung_named_by_it(tmp_path):
    (planned,) = plan_suite(
        tracks=["laddered"], rungs={"laddered": ("noise-1",)}, budget="smoke", threads=1
    )
    assert planned.rungs == ("noise-1",)
    assert planned.planned.track.settings["difficulty"] == "noise-1"
    result = suite_command(tmp_path, "--rungs", "laddered=noise-1")
    assert result.exit_code == 0, result.output
    (track,) = json.loads((tmp_path / "suite.json").read_text())["tracks"]
    assert [rung["rung"] for rung in track["rungs"]] == ["noise-1"]


def test_the_suite_plot_gives_each_peer_its_own_colour(tmp_path):
    from matplotlib import pyplot as plt

    from gridmix.report.suite_plots import figure_suite_track

    arm = dict(n=2, mean=0.5, interval=[0.4, 0.6])
    roles = {"idea-mixer": "idea", "attention": "baseline", "peer-a": "baseline"}
    roles |= {"peer-b": "baseline", "ablated": "ablation", "control": "control"}
    rung = dict(rung="r", grid="4x4", arms={m: dict(arm, role=role) for m, role in roles.items()})
    track = dict(track="t", rungs=[rung], baseline="attention", chance=0.0, ceiling=1.0)
    figure = figure_suite_track(dict(track, direction="higher", metric="accuracy"))
    # every mixer's errorbar container: its label and its data line
    colours = {bars.get_label(): bars.lines[0].get_color() for bars in figure.axes[0].containers}
    plt.close(figure)
    assert colours["attention"] == "tab:orange" and colours["idea-mixer"] == "tab:blue"
    assert len(set(colours.values())) == len(roles), colours
