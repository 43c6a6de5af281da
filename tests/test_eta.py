"""The time-left estimate: each pending run at its model's median finished time, shared by the workers."""

import pytest

from gridmix.study.eta import RunClock, format_duration


def test_nothing_is_estimated_before_a_run_finishes():
    assert RunClock().remaining_s(["vit", "vit"]) is None


def test_pending_runs_take_their_models_median_time_or_the_overall_one():
    clock = RunClock(jobs=2)
    for seconds in (50.0, 56.0, 54.0):
        clock.record("vit", seconds)
    clock.record("vit-concentration", 8.0)
    clock.record("vit-nomix", 0.0)  # a run that failed before training: no time to learn from
    # vit: median 54; the idea: 8; the control has none of its own: the median of all four, (8 + 50 + 54 + 56) -> 52
    assert clock.remaining_s(["vit", "vit-concentration", "vit-nomix"]) == pytest.approx((54 + 8 + 52) / 2)
    with pytest.raises(ValueError, match="jobs=0; expected >= 1"):
        RunClock(jobs=0)


def test_durations_print_in_minutes_and_seconds():
    assert format_duration(35.4) == "35 s" and format_duration(250) == "4 min 10 s"
    assert format_duration(60) == "1 min 0 s"
