"""The mqar track: recall data that hold what they claim, causal models, answer-only loss and
metric."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gridmix_tracks.mqar import (
    IGNORE,
    RecallTask,
    answer_accuracy,
    answer_cross_entropy,
    answer_loss,
    make_track,
)

from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes
from gridmix.tracks.budget import BUDGETS


def test_every_answer_is_the_value_of_its_key_in_the_context():
    task = RecallTask(vocab=32, pairs=5, queries=4)
    split = task.generate(np.random.default_rng(0), 50, 40)
    for tokens, targets in zip(split.inputs.tolist(), split.targets.tolist()):
        context = dict(zip(tokens[0:10:2], tokens[1:10:2]))
        assert len(context) == 5 and all(1 <= k < 16 <= v < 32 for k, v in context.items())
        answers = [t for t, y in enumerate(targets) if y != IGNORE]
        assert len(answers) == 4 and min(answers) >= 10
        for t in answers:
            # the next token is the key's value
            assert targets[t] == context[tokens[t]] == tokens[t + 1]
        assert len({tokens[t] for t in answers}) == 4  # no key asked twice


def test_data_are_deterministic_per_seed_and_splits_differ():
    track = make_track(RecallTask(vocab=16, pairs=3, queries=3))
    one, two = (track.make_data(Grid((24,)), 3, DataSizes(8, 8, 8)) for _ in range(2))
    assert torch.equal(one.train.inputs, two.train.inputs) and torch.equal(
        one.test.targets, two.test.targets
    )
    assert not torch.equal(one.train.inputs, one.val.inputs)


@pytest.mark.parametrize("model", ["transformer", "transformer-concentration"])
def test_models_predict_every_position_from_the_past_only(model):
    track = make_track(RecallTask(vocab=16, pairs=3, queries=3))
    torch.manual_seed(0)
    net = track.model(model).build(Grid((20,))).double().eval()
    tokens = torch.randint(0, 16, (2, 20))
    changed = tokens.clone()
    changed[:, 11:] = (changed[:, 11:] + 5) % 16
    out, moved = net(tokens), net(changed)
    assert out.shape == (2, 20, 16)
    torch.testing.assert_close(moved[:, :11], out[:, :11], rtol=0, atol=1e-12)
    assert (moved[:, 11:] - out[:, 11:]).abs().max() > 1e-6


def test_loss_and_metrics_count_only_the_answers():
    targets = torch.full((1, 4), IGNORE)
    targets[0, 2] = 3
    logits = torch.zeros(1, 4, 5)
    logits[0, :, 1] = 9.0  # wrong everywhere …
    logits[0, 2, 3] = 10.0  # … but at the one answer
    assert answer_accuracy(logits, targets) == 1.0
    expected = torch.nn.functional.cross_entropy(logits[0, 2:3], targets[0, 2:3])
    torch.testing.assert_close(answer_loss(logits, targets), expected)
    assert answer_cross_entropy(logits, targets) == pytest.approx(expected.item())


def test_the_metric_is_answer_accuracy_by_default_and_chance_is_a_uniform_guess_among_the_values():
    task = RecallTask(vocab=16, pairs=3, queries=3)
    track = make_track(task)
    assert (track.metric, track.direction, track.chance, track.ceiling) == (
        answer_accuracy,
        "higher",
        1 / 8,
        1.0,
    )
    targets = task.generate(np.random.default_rng(1), 8, 24).targets
    values = torch.zeros(8, 24, 16)
    values[..., :8] = -torch.inf  # the same logit for each of the 8 values, none for keys or filler
    nats = make_track(task, metric="cross-entropy")
    assert (nats.metric, nats.direction, nats.ceiling) == (answer_cross_entropy, "lower", 0.0)
    assert nats.metric(values, targets) == pytest.approx(nats.chance) == pytest.approx(math.log(8))
    with pytest.raises(ValueError, match="metric='mse'; expected one of"):
        make_track(task, metric="mse")


def test_the_default_budget_decays_weights_strongly_on_32_tokens():
    track = make_track()
    budget = track.budget("default")
    assert (budget.weight_decay, budget.epochs, budget.lrs) == (0.5, 14, (1.5e-3, 3e-3, 6e-3))
    # only the default changes
    assert track.budget("smoke").weight_decay == BUDGETS["smoke"].weight_decay
    assert track.default_grid == Grid((32,))


def test_settings_and_grids_are_checked():
    with pytest.raises(ValueError, match="pairs=20"):
        RecallTask(vocab=32, pairs=20)
    with pytest.raises(ValueError, match="at least 16 tokens; got 12"):
        make_track(RecallTask(vocab=32, pairs=4, queries=4)).check_grid("12")
