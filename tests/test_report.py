"""The typed report: it serialises to the JSON the report always had, reads back from it, renders
report.md and the terminal table as before, checks itself when built, and says which arm a mechanism
verdict is about."""

import dataclasses
import json

import pytest

from gridmix.analysis.verdicts import VERDICT_BETTER
from gridmix.cli.run import results_table
from gridmix.report.build import build_report, write_report
from gridmix.report.markdown import render_markdown
from gridmix.report.types import Arm, Comparison, Report
from gridmix.study.ledger import Ledger
from tests import report_example

FIGURES = ["paired.png", "curves.png"]  # as the reference Markdown was rendered


def build(out) -> Report:
    with Ledger(report_example.fill(out), create=False) as ledger:
        return build_report(ledger)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Report:
    return build(tmp_path_factory.mktemp("study"))


def reference_json() -> dict:
    """The report of the example study as the golden file holds it (regenerated on purpose when the
    report grew)."""
    return json.loads((report_example.DATA / "report_example.json").read_text())


NEW_KEYS = (
    "reference_comparisons",
    "min_effect",
)  # added with per-seed references; older reports lack them


def written_before_per_seed_references() -> dict:
    """The golden report without what per-seed references, the sign-flip interval and the
    constant-prediction flag added, with the mechanism verdict worded as before it named its arm: a
    report gridmix wrote earlier."""
    old = {k: v for k, v in reference_json().items() if k not in NEW_KEYS}
    comparisons = [old["comparison"], *old["comparisons"].values(), *old["mechanism"].values()]
    for arm in (old["idea"], *old["baselines"].values()):
        arm.pop("constant_prediction_seeds")
        comparisons += [arm["comparison"]] if "comparison" in arm else []
    for comparison in comparisons:
        for key in ("signflip_ci_low", "signflip_ci_high", "min_effect"):
            comparison.pop(key, None)
    old["mechanism"]["baseline_vs_control"]["verdict"] = VERDICT_BETTER
    return old


def test_the_report_serialises_to_the_keys_and_values_of_its_golden_file(report):
    before, after = reference_json(), json.loads(json.dumps(report.to_dict()))
    assert after == before
    # the same key order
    assert list(after) == list(before) and list(after["idea"]) == list(before["idea"])
    assert list(after["comparison"]) == list(before["comparison"])
    # p < α: excludes 0
    assert after["comparison"]["signflip_ci_low"] < after["comparison"]["signflip_ci_high"] < 0
    assert set(after["reference_comparisons"]) == set(report.arms) and after["min_effect"] == "1%"


def test_a_mechanism_verdict_names_the_arm_it_is_about(report):
    idea_question, baseline_question = (
        report.mechanism["idea_vs_control"],
        report.mechanism["baseline_vs_control"],
    )
    assert idea_question.verdict == VERDICT_BETTER and idea_question.a_better
    assert (
        baseline_question.verdict == "baseline better (significant)" and baseline_question.a_better
    )
    assert report.mechanism["ablation"].a_better is None  # no significant difference
    assert report.mechanism["ablation"].verdict == "no significant difference"
    assert set(baseline_question.to_dict()) == set(
        reference_json()["mechanism"]["baseline_vs_control"]
    )


def test_each_arm_shows_the_idea_comparison_with_it(
    report,
):  # the CLI table and the paired plot's panel titles
    assert (
        report.comparison_with("base") is report.comparison
        and report.comparison.family == "primary"
    )
    assert report.comparison_with("uncapped") is report.mechanism["ablation"]
    # not baseline_vs_control
    assert report.comparison_with("nomix") is report.mechanism["idea_vs_control"]
    assert report.comparison_with("wide") is report.arms["wide"].comparison


def test_a_stored_report_reads_back_as_the_same_object(report):
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    old = Report.from_dict(written_before_per_seed_references())  # an older report: still read
    assert old.mechanism["baseline_vs_control"].a_better and old.comparison.result.p_value == 2 / 64
    assert old.baseline.comparison is old.comparison  # one object per comparison, as built
    assert (
        old.reference_comparisons == {}
        and old.min_effect == "1%"
        and old.idea_arm.constant_seeds == ()
    )
    assert (
        old.comparison.result.signflip_ci_low is None and old.comparison.result.min_effect is None
    )
    with pytest.raises(
        ValueError, match="not a gridmix report .KeyError: 'comparisons'.; expected the JSON"
    ):
        Report.from_dict({"track": "image"})
    # before that key
    older = Report.from_dict({k: v for k, v in reference_json().items() if k != "fixed_split"})
    assert older == dataclasses.replace(Report.from_dict(reference_json()), fixed_split=False)
    with pytest.raises(ValueError, match="not a gridmix report .KeyError: 'precision'."):
        Report.from_dict({k: v for k, v in reference_json().items() if k != "precision"})


def test_renderers_take_the_object_and_write_what_they_wrote_before(report):
    # report_example.md and report_example_table.txt were regenerated on purpose for one precision
    # rule (and headers saying what they compare, parity warning only on the matched baseline's
    # parameters; the table as piped output prints it: plain aligned text), and the headline's
    # intervals then said as every other place says them
    assert (
        render_markdown(report, figures=FIGURES)
        == (report_example.DATA / "report_example.md").read_text()
    )
    assert (
        results_table(report).plain()
        == (report_example.DATA / "report_example_table.txt").read_text()
    )


def test_the_written_json_is_the_objects(
    tmp_path,
):  # and `gridmix report` re-renders it (tests/conftest.py)
    report = build(tmp_path)
    paths = write_report(report, tmp_path)  # beside the ledger, as `gridmix run` writes it
    written = json.loads(paths[0].read_text())
    # the example's
    assert written["plot_errors"] and written["plot_errors"][0].startswith("scaling plot: ")
    # scaling lacks fields
    assert Report.from_dict(written) == report.with_plot_errors(written["plot_errors"])
    assert "![paired.png](paired.png)" in paths[1].read_text()


def test_the_report_and_its_parts_check_themselves(report):
    arm = report.idea_arm
    with pytest.raises(ValueError, match="arm 'mix': 5 test values for 6 finished seeds"):
        dataclasses.replace(arm, per_seed=arm.per_seed[:5])
    with pytest.raises(ValueError, match="arm 'mix': flag 'at sea'; expected None or one of"):
        dataclasses.replace(arm, flag="at sea")
    with pytest.raises(ValueError, match="family 'tertiary'; expected one of"):
        dataclasses.replace(report.comparison, family="tertiary")
    with pytest.raises(ValueError, match="expected either a result or a reason"):
        Comparison(a="mix", b="base", family="primary", verdict="not compared")
    with pytest.raises(ValueError, match="expected the idea 'mix' first"):
        dataclasses.replace(report, arms=dict(reversed(report.arms.items())))
    # the idea's with it
    with pytest.raises(ValueError, match="arm 'base' .* does not carry its comparison"):
        dataclasses.replace(
            report,
            arms={**report.arms, "base": dataclasses.replace(report.baseline, comparison=None)},
        )
    with pytest.raises(ValueError, match="primary reachable=False with smallest p 0.03125"):
        dataclasses.replace(
            report.power, primary=dataclasses.replace(report.power.primary, reachable=False)
        )
    assert isinstance(arm, Arm) and arm.by_seed == dict(enumerate(arm.per_seed))


def test_references_stored_before_they_were_per_seed_stand_for_every_seed(tmp_path):
    with Ledger(report_example.fill(tmp_path), create=False) as ledger:
        # seed 0 only
        ledger.put("references", dict(kind="regression", values={"mean": 2.5, "persistence": 0.58}))
        report = build_report(ledger)
    against = report.reference_comparisons
    assert set(against) == set(report.arms) and {c.b for c in against.values()} == {"persistence"}
    mix = against["mix"].result  # the idea's six values against the one stored value
    assert mix.per_seed_diffs == pytest.approx([v - 0.58 for v in report_example.ARMS["mix"][1]])
    text = render_markdown(report)
    assert (
        "## References (seed 0's data standing for every seed: stored before references were "
        "computed per seed)" in text
    )


def test_the_headline_gives_the_cost_beside_the_quality(report):
    """The idea's parameters, FLOPs and training time as ratios to its matched baseline's, each with
    how it was measured, in report.md's headline: the example's parity rows and run times."""
    headline = render_markdown(report).split("\n## ")[0]
    cost = next(line for line in headline.splitlines() if line.startswith("**Cost:**"))
    timings = report.timings["per_model"]
    run_ratio = timings["mix"]["median_run_s"] / timings["base"]["median_run_s"]
    step_ratio = timings["mix"]["median_step_ms"] / timings["base"]["median_step_ms"]
    assert "mix vs its matched baseline base" in cost
    assert "0.909x the parameters" in cost and "0.8x the FLOPs (torch's FlopCounterMode" in cost
    assert f"{run_ratio:.3g}x the training time per run" in cost and "median wall clock" in cost
    assert f"{step_ratio:.3g}x per training step" in cost and "epochs × batches" in cost


def test_a_step_is_a_run_over_its_epochs_times_batches(report):
    """Every run of the example's idea trained 3 epochs on 128 samples in the budget's batches."""
    steps = 3 * -(-128 // report.budget["batch_size"])
    mix = report.timings["per_model"]["mix"]
    assert mix["median_step_ms"] == pytest.approx(mix["median_run_s"] / steps * 1e3)


def test_the_terminal_summary_prints_the_cost(report, monkeypatch):
    """``gridmix run`` prints the same cost sentence after its results table."""
    import io

    import typer
    from rich.console import Console

    from gridmix.cli import run

    out = io.StringIO()
    monkeypatch.setattr(run, "console", Console(file=out, width=100))
    outcome = type("Outcome", (), dict(report=report, paths=("a", "b"), seconds=1.0))()
    try:
        run.print_run(outcome)
    except typer.Exit:  # exit status 1 when an analysis failed, after printing
        pass
    printed = " ".join(out.getvalue().split())
    assert "cost: mix vs its matched baseline base: 0.909x the parameters" in printed
    timings = report.timings["per_model"]
    ratio = timings["mix"]["median_run_s"] / timings["base"]["median_run_s"]
    assert f"{ratio:.3g}x the training time per run" in printed


def test_the_scaling_section_names_a_busy_machine_and_quotes_the_spread(report):
    """The example's scaling was recorded at load 3 on 2 cores; at load 1 no line is written."""
    section = render_markdown(report).split("## Scaling")[1].split("\n## ")[0]
    assert "⚠ The machine was busy (load average 3 on 2 cores): timings are not idle figures." in (
        section
    )
    assert "| mix | 16 | 1,000 | 8 | 12 (11.4–13.2) |" in section  # median (25th–75th), 3 digits
    assert "| mix | time | 3 | 1.92 (0.886 … 2.95) | 0.998 | – |" in section
    assert "| mix | memory | 2 | – | – | – |" in section  # two grids: no exponent
    idle = dict(report.analyses["scaling"], load_average=[1.0, 1.0])
    quiet = dataclasses.replace(report, analyses=dict(report.analyses, scaling=idle))
    assert "busy" not in render_markdown(quiet)
