"""Verdicts a reviewer would sign: the primary comparison alone at α, power checked before training,
sweep seeds apart from comparison seeds, floor flags, and an A/A false-positive rate at the exact
test's level."""

import json

import pytest
import torch
from scipy import stats as scipy_stats
from torch import nn
from typer.testing import CliRunner

from gridmix import ConcentrationMixer, Grid, TokenwiseMixer
from gridmix.analysis.stats import exact_level, seeds_needed
from gridmix.analysis.verdicts import VERDICT_BETTER, VERDICT_UNREACHABLE
from gridmix.cli import app
from gridmix.orchestrate.calibration import aa_false_positive_rate
from gridmix.study.ledger import Ledger
from gridmix.study.spec import SWEEP_SEED_OFFSET, Study
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track

N = 8  # grid length


def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
    """Target: the mean of every token. A model that reads one token cannot know it."""
    gen = torch.Generator().manual_seed(seed)

    def split(count):
        x = torch.randn(count, grid[0], generator=gen)  # (S, n)
        return Split(x, x.mean(1, keepdim=True) * 3)  # (S, 1)

    return TrackData(split(sizes.n_train), split(sizes.n_val), split(sizes.n_test))


class FirstToken(nn.Module):
    """Embeds every token, mixes them, and predicts from the first token alone."""

    def __init__(self, mixer: nn.Module, dim: int = 8):
        super().__init__()
        self.embed, self.mixer, self.head = nn.Linear(1, dim), mixer, nn.Linear(dim, 1)

    def forward(self, x):  # (B, n) -> (B, 1)
        h = self.embed(x[..., None])  # (B, n, C)
        return self.head((h + self.mixer(h))[:, 0])  # (B, 1)


def clear_track(**changes) -> Track:
    fields = dict(
        name="clear",
        description="the idea sees every token, the baselines one",
        ndim=1,
        default_grid=Grid((N,)),
        make_data=make_data,
        loss=nn.functional.mse_loss,
        metric=lambda p, t: float(((p - t) ** 2).mean()),
        metric_name="test MSE",
        direction="lower",
        matched_baseline="one-token",
        models=(
            ModelSpec(
                "mixer",
                lambda g: FirstToken(ConcentrationMixer(8, g, num_heads=1, rank=4)),
                role="idea",
            ),
            ModelSpec("one-token", lambda g: FirstToken(TokenwiseMixer(8, g))),
            ModelSpec("one-token-wide", lambda g: FirstToken(TokenwiseMixer(16, g), dim=16)),
            ModelSpec("no-mix", lambda g: FirstToken(TokenwiseMixer(8, g)), role="control"),
        ),
        budget_overrides={
            "default": dict(n_train=256, n_val=64, n_test=256, epochs=4, lrs=(1e-2,))
        },
    )
    return Track(**{**fields, **changes})


class ClearPlugin:
    @hookimpl
    def gridmix_tracks(self):
        return [
            clear_track(),
            clear_track(name="clear-chance", chance=2.5, ceiling=0.0),
        ]  # MSE 2.5: a poor guess


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[ClearPlugin(), fake_track], refresh=True)
    load_registry(refresh=True)


def run(*args):
    return CliRunner().invoke(
        app, ["run", "--no-scaling", "--threads", "1", *args], env={"COLUMNS": "200"}
    )


def test_a_clear_win_is_significant_at_the_default_seeds_with_two_baselines(tmp_path):
    result = run("--track", "clear", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    primary = report["comparison"]
    assert report["n_seeds"] == 6 and report["primary_baseline"] == "one-token"
    assert primary["family"] == "primary" and primary["idea_wins"] == 6
    assert (
        primary["p_value"] == primary["p_holm"] == 2 / 64 and primary["verdict"] == VERDICT_BETTER
    )
    secondary = report["comparisons"]["one-token-wide"]
    assert secondary["family"] == "secondary" and report["holm_adjusted_over"] == ["one-token-wide"]
    assert secondary["verdict"] == VERDICT_BETTER  # a family of one: Holm leaves it at 2/64
    assert report["power"]["primary"] == dict(min_p=2 / 64, seeds_needed=6, reachable=True)
    # each mechanism question is tested alone, so 6 seeds can answer it too
    mechanism = report["mechanism"]
    assert set(mechanism) == {
        "idea_vs_control",
        "baseline_vs_control",
    }  # the track has no ablation arm
    assert (
        mechanism["idea_vs_control"]["verdict"] == VERDICT_BETTER
        and mechanism["idea_vs_control"]["holm_over"] == 1
    )
    assert (
        "does the idea's token mixing help over no mixing?"
        in (tmp_path / "out" / "report.md").read_text()
    )
    # the interval from inverting the test agrees with it; the practical threshold is the default, 1
    # %
    assert primary["signflip_ci_high"] < 0 and primary["min_effect"] == pytest.approx(
        0.01 * primary["baseline_mean"]
    )
    assert report["min_effect"] == "1%"
    # the same study with a threshold no MSE win can pass
    with Ledger(tmp_path / "out", create=False) as ledger:
        ledger.put("study", dict(ledger.study(), min_effect="100%"))
    assert CliRunner().invoke(app, ["report", str(tmp_path / "out")]).exit_code == 0
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    assert report["comparison"]["verdict"] == "idea better (significant but negligible)"
    assert "significant but negligible" in (tmp_path / "out" / "report.md").read_text()


def test_a_bad_min_effect_is_refused_in_one_line_before_any_training(tmp_path):
    result = run("--track", "clear", "--min-effect", "big", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "min effect 'big'; expected a number in the metric's units" in result.output
    assert not (tmp_path / "out").exists()


def test_too_few_seeds_are_refused_before_any_training(tmp_path):
    result = run("--track", "clear", "--seeds", "5", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "cannot reach α = 0.05" in result.output and "needs at least 6 seeds" in result.output
    assert not (tmp_path / "out").exists()  # nothing trained, no ledger


def test_underpowered_runs_say_they_cannot_reach_alpha(tmp_path):
    result = run(
        "--track",
        "clear",
        "--seeds",
        "4",
        "--underpowered",
        "--models",
        "one-token",
        "--out",
        str(tmp_path / "out"),
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    assert (
        report["comparison"]["verdict"] == VERDICT_UNREACHABLE
        and report["comparison"]["idea_wins"] == 4
    )
    assert report["power"]["underpowered_run"] and not report["power"]["primary"]["reachable"]
    assert "cannot reach α = 0.05" in (tmp_path / "out" / "report.md").read_text()


def test_sweep_seeds_never_enter_the_comparison(tmp_path):
    result = run(
        "--track",
        "clear",
        "--lrs",
        "3e-3,1e-2",
        "--models",
        "one-token",
        "--out",
        str(tmp_path / "out"),
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    sweep = [SWEEP_SEED_OFFSET, SWEEP_SEED_OFFSET + 1]  # the default budget's 2 sweep seeds
    assert report["seeds"] == dict(comparison=list(range(6)), sweep=sweep)
    with Ledger(tmp_path / "out", create=False) as ledger:
        rows = ledger.rows()
    assert {row.seed for row in rows} == set(range(6)) | set(sweep)
    # per model: 2 rates on 2 sweep seeds, then 6 comparison seeds
    assert len(rows) == 2 * (2 * 2 + 6)
    assert "sweep seeds [1000, 1001]" in (tmp_path / "out" / "report.md").read_text()


def test_arms_worse_than_chance_are_flagged_and_the_verdict_is_uninformative(tmp_path):
    result = run("--track", "clear-chance", "--models", "one-token", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    # far from 2.5
    assert report["idea"]["flag"] is None and report["comparison"]["verdict"] == VERDICT_BETTER
    # the same study, with a floor above every arm
    with Ledger(tmp_path / "out", create=False) as ledger:
        spec = ledger.study()
        ledger.put("study", dict(spec, chance=0.0, ceiling=-1.0))
    assert CliRunner().invoke(app, ["report", str(tmp_path / "out")]).exit_code == 0
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    assert report["idea"]["flag"] == report["baseline"]["flag"] == "at chance"
    assert report["comparison"]["verdict"] == "uninformative: both arms at chance"


def test_seeds_needed_grows_with_the_holm_family():
    assert [seeds_needed(comparisons=m) for m in (1, 2, 3, 4)] == [6, 7, 7, 8]
    assert [exact_level(n) for n in (5, 6, 8)] == [0.0, 2 / 64, 12 / 256]


def test_a_study_refuses_comparison_seeds_that_are_sweep_seeds():
    with pytest.raises(ValueError, match="none of the sweep seeds"):
        Study(
            track="fake",
            grid="8",
            models=("fake-mixer", "fake-attention"),
            idea="fake-mixer",
            matched_baseline="fake-attention",
            metric_name="m",
            direction="lower",
            device="cpu",
            threads=1,
            budget=fake_budget(lrs=(1e-3, 3e-3)),
            first_seed=SWEEP_SEED_OFFSET - 2,
        )


def fake_budget(**changes):
    import dataclasses

    from gridmix.tracks.budget import BUDGETS

    return dataclasses.replace(
        BUDGETS["smoke"],
        **{
            **dict(seeds=6, lrs=(3e-3,), epochs=1, n_train=32, n_val=8, n_test=64, batch_size=32),
            **changes,
        },
    )


def test_aa_false_positive_rate_is_at_the_exact_level(tmp_path_factory, one_thread):
    """Many tiny A/A studies through the real runner, ledger and report on the fake track (their
    reports are built in the test, so the ledgers live outside ``tmp_path``, where conftest would
    report each again)."""
    study = Study(
        track="fake",
        grid="8",
        models=("fake-mixer", "fake-attention"),
        idea="fake-mixer",
        matched_baseline="fake-attention",
        metric_name="test MSE",
        direction="lower",
        budget=fake_budget(),
        device="cpu",
        threads=1,
        first_seed=2000,
    )
    replicates = 96
    result = aa_false_positive_rate(study, tmp_path_factory.mktemp("aa"), replicates=replicates)
    level = exact_level(6)
    assert result["exact_level"] == level == 2 / 64
    # The count of false positives is Binomial(96, 2/64) if the harness is sound: not above its
    # 99.9% quantile.
    assert result["significant"] <= scipy_stats.binom.ppf(0.999, replicates, level)
    # The arms differ (not one model twice) and are not systematically apart: p-values spread like
    # the null's.
    below_half = sum(p <= 0.5 for p in result["p_values"])
    assert (
        scipy_stats.binom.ppf(0.001, replicates, 0.5)
        <= below_half
        <= scipy_stats.binom.ppf(0.999, replicates, 0.5)
    )
    assert len(set(result["p_values"])) > 3


def test_aa_run_compares_the_matched_baseline_with_a_copy_of_itself(tmp_path):
    result = run("--track", "clear", "--aa", "--seeds", "6", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    assert report["model"] == "one-token~aa" and report["primary_baseline"] == "one-token"
    assert set(report["baselines"]) == {"one-token"}
    diffs = report["comparison"]["per_seed_diffs"]
    assert all(d != 0 for d in diffs)  # independent initialisations: never the same model twice
    with Ledger(tmp_path / "out", create=False) as ledger:
        rows = ledger.rows()
    seeds = {
        model: sorted(row.seed for row in rows if row.model == model)
        for model in ("one-token~aa", "one-token")
    }
    # the same data seeds (one rate: no sweep)
    assert seeds["one-token~aa"] == seeds["one-token"] == list(range(6))
