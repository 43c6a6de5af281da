"""The built-in tracks' data: deterministic per seed, different across seeds, well-formed; the CSV
and image folder loaders; no leakage in forecasting windows."""

import math
import shutil

import numpy as np
import pytest
import torch
from gridmix_tracks import image_folder, sequence_csv
from gridmix_tracks.common import binary_entropy, mean_cross_entropy
from gridmix_tracks.image import SameTintTask
from gridmix_tracks.image import make_track as image_track
from gridmix_tracks.sequence import ForecastTask
from gridmix_tracks.sequence import make_track as sequence_track
from gridmix_tracks.sequence_csv import csv_sequence_track, read_csv_series, window_indices
from gridmix_tracks.video import CutTask
from gridmix_tracks.video import make_track as video_track
from PIL import Image

from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes
from gridmix.tracks.plugin_loader import load_registry, validate_data

SIZES = DataSizes(n_train=12, n_val=6, n_test=6)
CASES = [  # track, small grid, input shape per sample, target shape per sample, target dtype
    (sequence_track, Grid((16,)), (1, 16), (16,), torch.float32),
    (image_track, Grid((8, 12)), (1, 8, 12), (), torch.int64),
    (video_track, Grid((4, 6, 6)), (1, 4, 6, 6), (), torch.int64),
]


@pytest.fixture
def registry_env(monkeypatch):
    for name in (
        "GRIDMIX_PLUGINS",
        "GRIDMIX_DISABLE_PLUGIN_AUTOLOAD",
        sequence_csv.ENV,
        sequence_csv.TARGET_ENV,
        image_folder.ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch
    monkeypatch.undo()
    load_registry(refresh=True)


@pytest.mark.parametrize(("make", "grid", "x_shape", "y_shape", "y_dtype"), CASES)
def test_data_is_deterministic_per_seed_and_well_formed(make, grid, x_shape, y_shape, y_dtype):
    track = make()
    first, again, other = (track.make_data(grid, seed, SIZES) for seed in (0, 0, 1))
    validate_data(track, first, grid)
    for split, n in (("train", 12), ("val", 6), ("test", 6)):
        a, b, c = getattr(first, split), getattr(again, split), getattr(other, split)
        assert a.inputs.shape == (n, *x_shape) and a.inputs.dtype == torch.float32
        assert a.targets.shape == (n, *y_shape) and a.targets.dtype == y_dtype
        assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
        assert not torch.equal(a.inputs, c.inputs)
    assert not torch.equal(first.train.inputs[:6], first.val.inputs)  # splits are independent draws


@pytest.mark.parametrize(
    ("make", "grid", "classes"),
    [(image_track, Grid((32, 32)), 2), (video_track, Grid((8, 8, 8)), 2)],
)
def test_classification_labels_cover_every_class_evenly(make, grid, classes):
    labels = make().make_data(grid, 0, DataSizes(400, 8, 8)).train.targets
    counts = torch.bincount(labels, minlength=classes)
    assert len(counts) == classes and counts.min() > 0.5 * counts.float().mean()


def test_image_label_says_whether_the_square_has_the_background_tint():
    split = SameTintTask(noise=0.0, label_noise=0.0).generate(
        np.random.default_rng(0), 64, Grid((32, 32))
    )
    for image, label in zip(split.inputs[:, 0], split.targets):
        values, counts = torch.unique(image, return_counts=True)
        assert sorted(counts.tolist()) == [
            495,
            529,
        ]  # a 23x23 square of one tint on a background of another
        square, background = (values[counts == 529], values[counts == 495])
        assert bool(label) == bool(torch.sign(square) == torch.sign(background))


def test_image_tokens_alone_carry_no_label_information():
    # Any one token's value has the same distribution under both labels (its tint's sign is a fair
    # coin and its magnitude uniform in 0.5..1), so a model without token mixing, whose logit is a
    # sum of per-token terms, is blind up to the 75 % that a threshold on one tint's sign allows.
    split = SameTintTask(noise=0.0, label_noise=0.0).generate(
        np.random.default_rng(1), 4000, Grid((32, 32))
    )
    tokens = split.inputs[:, 0, ::8, ::8].flatten(1)  # (4000, 16) tokens spread over the grid
    for label in (0, 1):
        chosen = tokens[split.targets == label]
        assert abs((chosen > 0).float().mean() - 0.5) < 0.03
        assert abs(chosen.abs().mean() - 0.75) < 0.02
    # Two tokens together do: the centre (almost always in the square) and a corner (almost never in
    # it) have the same sign exactly when the label is 1, except where both lie in the background.
    same = (torch.sign(split.inputs[:, 0, 16, 16]) == torch.sign(split.inputs[:, 0, 0, 0])).float()
    assert (same == split.targets.float()).float().mean() > 0.85


def test_image_label_noise_flips_the_asked_fraction():
    clean = SameTintTask(label_noise=0.0).generate(np.random.default_rng(2), 4000, Grid((16, 16)))
    noisy = SameTintTask(label_noise=0.1).generate(np.random.default_rng(2), 4000, Grid((16, 16)))
    assert torch.equal(clean.inputs, noisy.inputs)
    assert abs((clean.targets != noisy.targets).float().mean() - 0.1) < 0.02


def test_video_label_says_whether_the_scene_tint_flips_sign_at_the_cut():
    # Noise-free on 8 frames of 8x8: the 2x2 moving square covers 4 of 64 pixels, so every frame's
    # median is the scene's tint; the label is 1 exactly when the tint's sign differs between the
    # frames before and after frame 4.
    split = CutTask(noise=0.0, label_noise=0.0).generate(
        np.random.default_rng(0), 256, Grid((8, 8, 8))
    )
    tint = split.inputs[:, 0].flatten(2).median(dim=2).values  # (256, 8) per frame
    assert torch.equal(tint[:, :4], tint[:, :1].expand(-1, 4)) and torch.equal(
        tint[:, 4:], tint[:, 4:5].expand(-1, 4)
    )
    flips = (torch.sign(tint[:, 0]) != torch.sign(tint[:, -1])).long()
    assert torch.equal(flips, split.targets) and 0.4 < split.targets.float().mean() < 0.6
    assert ((tint.abs() >= 0.5) & (tint.abs() <= 1.0)).all()
    # The square moves one pixel a frame: its pixels (those off the frame's median) shift between
    # frames.
    off = split.inputs[:, 0] != tint[:, :, None, None]  # (256, 8, 8, 8)
    assert (off.sum(dim=(2, 3)) <= 4).all() and not torch.equal(off[:, 0], off[:, 1])


def test_video_tokens_alone_carry_no_label_information():
    # Any one token's value has the same distribution under both labels (the tint's sign is a fair
    # coin, its magnitude uniform in 0.5..1, the square's likewise), so a model whose logit is a sum
    # of per-token terms is blind up to the 75 % a threshold on one half's sign allows; a token
    # before the cut and one after, together, tell the label.
    split = CutTask(noise=0.0, label_noise=0.0).generate(
        np.random.default_rng(1), 4000, Grid((8, 8, 8))
    )
    tokens = split.inputs[:, 0, ::3, ::4, ::4].flatten(1)  # (4000, 12) tokens spread over the clip
    for label in (0, 1):
        chosen = tokens[split.targets == label]
        assert abs((chosen > 0).float().mean() - 0.5) < 0.03
        assert abs(chosen.abs().mean() - 0.75) < 0.02
    flipped = (
        torch.sign(split.inputs[:, 0, 0, 0, 0]) != torch.sign(split.inputs[:, 0, -1, 0, 0])
    ).long()
    assert (flipped == split.targets).float().mean() > 0.85


def test_video_label_noise_flips_the_asked_fraction():
    clean = CutTask(label_noise=0.0).generate(np.random.default_rng(2), 4000, Grid((4, 6, 6)))
    noisy = CutTask(label_noise=0.1).generate(np.random.default_rng(2), 4000, Grid((4, 6, 6)))
    assert torch.equal(clean.inputs, noisy.inputs)
    assert abs((clean.targets != noisy.targets).float().mean() - 0.1) < 0.02


def test_video_ceiling_is_the_cross_entropy_of_knowing_the_clean_label():
    # Knowing every clean label, the best guess gives it probability 0.9 (10 % are flipped): its
    # cross-entropy is the track's ceiling, and any other confidence does worse.
    clean = (
        CutTask(label_noise=0.0).generate(np.random.default_rng(3), 20000, Grid((4, 6, 6))).targets
    )
    noisy = CutTask().generate(np.random.default_rng(3), 20000, Grid((4, 6, 6))).targets

    def knowing(confidence):
        probabilities = torch.where(
            torch.nn.functional.one_hot(clean, 2).bool(), confidence, 1 - confidence
        )
        return mean_cross_entropy(probabilities.log(), noisy)

    ceiling = video_track().ceiling
    assert abs(knowing(0.9) - ceiling) < 0.01 and 0.32 < ceiling < 0.33
    assert knowing(0.8) > knowing(0.9) < knowing(0.97)


# the report's chance/ceiling flags read it alike
def test_image_and_video_share_the_flipped_label_ceiling():
    assert image_track().ceiling == video_track().ceiling == binary_entropy(0.1)
    assert image_track(SameTintTask(label_noise=0.0)).ceiling == 0.0


def fitted_logistic_cross_entropy(train_features, train_labels, test_features, test_labels):
    """Held-out cross-entropy of a logistic regression fitted (LBFGS, small ridge) on the given
    features."""
    weights = torch.zeros(train_features.shape[1] + 1, requires_grad=True)
    optimizer = torch.optim.LBFGS([weights], max_iter=200)

    def logits(features):
        return features @ weights[1:] + weights[0]

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits(train_features), train_labels.float()
        )
        (loss + 1e-4 * weights.square().sum()).backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return torch.nn.functional.binary_cross_entropy_with_logits(
            logits(test_features), test_labels.float()
        ).item()


def test_video_no_logit_summed_over_tokens_beats_chance_but_the_clip_mean_does():
    # Why the no-mixing control sits at chance at any rate and noise level: each token is
    # label-blind, so for a logit z = sum of per-token terms E[(1/2 - y) z] = 0 and the expected
    # cross-entropy is at least ln 2. Here the per-token terms are free functions of every token's
    # value (8 bins a token, one weight each); |clip mean|, which uniform attention and the mixer's
    # global start hand every token at step 0, is far below ln 2.
    task, grid = CutTask(), Grid((4, 6, 6))
    train, test = (task.generate(np.random.default_rng(seed), 4000, grid) for seed in (4, 5))

    def per_token_bins(split):  # (S, N·8): one-hot of each token's value in 8 bins
        bins = torch.bucketize(split.inputs.flatten(1), torch.linspace(-2.0, 2.0, 7))
        return torch.nn.functional.one_hot(bins, 8).flatten(1).float()

    def clip_mean(split):  # (S, 1)
        return split.inputs.flatten(1).mean(dim=1, keepdim=True).abs()

    additive = fitted_logistic_cross_entropy(
        per_token_bins(train), train.targets, per_token_bins(test), test.targets
    )
    mixed = fitted_logistic_cross_entropy(
        clip_mean(train), train.targets, clip_mean(test), test.targets
    )
    assert additive > math.log(2) - 0.01 and mixed < 0.45, (additive, mixed)


def test_video_default_budget_sweeps_three_gentle_rates():
    # At 3e-3 dense attention (the matched baseline) could leave the chance plateau in its first
    # epoch, spike past ln 2 at the peak rate and stay at chance; 1e-3 took off on every seed. The
    # sweep of three (so that a choice at its edge means something) stays below 3e-3.
    budget = video_track().budget("default")
    assert budget.lrs == (5e-4, 1e-3, 2e-3) and max(budget.lrs) < 3e-3 and budget.sweep_seeds == 1
    assert budget.batch_size == 8 and budget.epochs * budget.n_train // 8 == 768


def test_every_built_in_track_sweeps_at_least_three_rates_by_default():
    from gridmix.tracks.plugin_loader import load_registry

    tracks = load_registry(refresh=True).tracks
    for track in tracks.values():
        assert len(track.budget("default").lrs) >= 3, track.name


def test_sequence_windows_never_leak_targets(tmp_path):
    n, context, horizon = 200, 16, 4
    windows = window_indices(n, context=context, horizon=horizon)
    start_val, start_test = int(0.7 * n), int(0.85 * n)
    for inputs, targets in windows.values():
        # the input is exactly the past
        assert (inputs.max(axis=1) + 1 == targets.min(axis=1)).all()
        assert (np.diff(inputs, axis=1) == 1).all() and (np.diff(targets, axis=1) == 1).all()
    train_rows = set(np.concatenate([windows["train"][0].ravel(), windows["train"][1].ravel()]))
    assert max(train_rows) < start_val
    assert windows["val"][1].min() >= start_val and windows["val"][1].max() < start_test
    assert windows["test"][1].min() >= start_test and windows["test"][1].max() == n - 1
    # Through the loader: a column holding its own row index shows which rows each sample read.
    path = tmp_path / "rows.csv"
    path.write_text("t,value\n" + "".join(f"{i},{i}\n" for i in range(n)))
    data = csv_sequence_track(path, "value", horizon=horizon).make_data(
        Grid((context,)), 0, DataSizes(999, 999, 999)
    )
    train_part = np.arange(start_val)  # standardised with the training part's mean and std

    def rows(z):
        return (z.double() * train_part.std() + train_part.mean()).round().long()

    seen_in_training = set(rows(data.train.inputs).ravel().tolist()) | set(
        rows(data.train.targets).ravel().tolist()
    )
    assert max(seen_in_training) < start_val
    for split, first_target in (("val", start_val), ("test", start_test)):
        inputs, targets = (
            rows(getattr(data, split).inputs[:, 0]),
            rows(getattr(data, split).targets),
        )
        assert (targets[:, 0] == inputs[:, -1] + 1).all() and targets.min() >= first_target
        assert not set(targets.ravel().tolist()) & seen_in_training
    assert len(data.train) == len(windows["train"][0]) and len(data.test) == len(windows["test"][0])


def test_synthetic_sequence_targets_continue_the_input():
    # Noise-free sines: the series is smooth, so the first target continues the context's last
    # steps.
    split = ForecastTask(noise=0.0).generate(np.random.default_rng(0), 64, 32)
    x, y = split.inputs[:, 0].double(), split.targets.double()
    step_in = (x[:, -1] - x[:, -2]).abs()
    step_across = (y[:, 0] - x[:, -1]).abs()
    assert torch.median(step_across / (step_in + 1e-3)) < 3


def _lag_windows(split, width: int) -> np.ndarray:
    """Every window of ``width`` consecutive values of each whole series (context then targets): (S,
    windows, width)."""
    series = np.concatenate(
        [split.inputs[:, 0].double().numpy(), split.targets.double().numpy()], axis=1
    )
    return np.lib.stride_tricks.sliding_window_view(series, width, axis=1)


def test_sequence_kinds_choose_the_generators():
    # Noise-free sums of at most three sines obey a linear recurrence of order 6: windows of 7
    # values are rank 6. AR(2) and Mackey-Glass series do not; drawing only "sines" must give only
    # such series.
    def smallest_relative_singular_value(kind: str) -> np.ndarray:
        split = ForecastTask(kinds=(kind,), noise=0.0).generate(np.random.default_rng(0), 32, 32)
        singular = np.linalg.svd(_lag_windows(split, 7), compute_uv=False)  # (S, 7)
        return singular[:, -1] / singular[:, 0]

    assert smallest_relative_singular_value("sines").max() < 1e-5
    assert smallest_relative_singular_value("ar").min() > 1e-4
    assert smallest_relative_singular_value("mackey-glass").min() > 1e-4
    assert ForecastTask().kinds == ("sines", "mackey-glass")
    for kinds in ((), ("sines", "sines"), ("noise",)):
        with pytest.raises(ValueError, match=r"kinds=.*; expected distinct names among"):
            ForecastTask(kinds=kinds)


def test_the_default_sequence_task_asks_more_than_a_fixed_linear_forecast():
    # A per-token model with the flattening head can add any function of each value and its
    # position: it holds every fixed linear forecast from the window. Least squares on 2,048 series
    # shows how far that gets: most of the sines' variance is left (each series has its own
    # periods), a quarter of Mackey-Glass's. AR(2) 16 steps ahead is hardly foreseeable at all,
    # which is why the default task leaves it out.
    def linear_forecast_mse(kind: str) -> np.ndarray:
        task = ForecastTask(kinds=(kind,))
        train, test = (
            task.generate(np.random.default_rng(seed), n, 64) for seed, n in ((0, 2048), (1, 1024))
        )
        design = [np.c_[split.inputs[:, 0].numpy(), np.ones(len(split))] for split in (train, test)]
        weights = np.linalg.lstsq(design[0], train.targets.numpy(), rcond=None)[0]  # (L + 1, H)
        return ((design[1] @ weights - test.targets.numpy()) ** 2).mean(axis=0)  # (H,)

    sines, mackey_glass, ar = (
        linear_forecast_mse(kind) for kind in ("sines", "mackey-glass", "ar")
    )
    assert sines.mean() > 0.6 and mackey_glass.mean() > 0.2
    assert ar[-1] > 0.9 and ar[-1] > 2 * sines[0]


def test_the_default_sequence_budget_has_seeds_and_test_series_for_a_precise_comparison():
    budget = sequence_track().budget("default")
    # the sign-flip MDE is 1.78 s_d at 6 seeds, 1.18 s_d at 8, about 1.0 at 10
    assert budget.seeds == 10
    # test sampling was most of the spread at 2,048
    assert budget.n_test >= 16384 and budget.n_train >= 4096


def test_csv_loader_reads_columns_by_name_or_index(tmp_path):
    path = tmp_path / "series.csv"
    path.write_text("date,load,temp\n2024-01-01,1.5,3\n2024-01-02,2.5,4\n")
    assert read_csv_series(path, None).target == "temp"
    series = read_csv_series(path, "load")
    assert series.names == ("load",) and series.values.tolist() == [[1.5], [2.5]]
    assert read_csv_series(path, "1").values.tolist() == [[1.5], [2.5]]
    headless = tmp_path / "headless.csv"
    headless.write_text("1,2\n3,4\n")
    assert read_csv_series(headless, "0").values[:, 0] == pytest.approx(np.array([1.0, 3.0]))
    dated = tmp_path / "dated.csv"  # a first row of a date and numbers is data, not a header
    dated.write_text("2024-01-01,1.5\n2024-01-02,2.5\n")
    assert read_csv_series(dated).values.tolist() == [[1.5], [2.5]]


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("a,b\n1,2\n3,nan\n", "b", "row 3, column 'b': missing value 'nan'"),
        ("a,b\n1,2\n3,\n", "b", "row 3, column 'b': missing value ''"),
        ("a,b\n1,2\n3,x7\n", "b", "row 3, column 'b': 'x7' is not a number"),
        ("a,b\n1,2\n3\n", "b", "row 3 has 1 cells; column 'b' is cell 2"),
        ("a,value\n1,2\n", "valeu", "no column 'valeu'; did you mean 'value'? columns: a, value"),
        ("a,b\n1,inf\n", "b", "row 2, column 'b': 'inf' is not a finite number"),
    ],
)
def test_csv_loader_errors_name_the_row_and_column(tmp_path, text, column, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        read_csv_series(path, column)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_csv_too_short_and_constant_series_give_clear_errors(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("v\n" + "".join(f"{i}\n" for i in range(40)))
    track = csv_sequence_track(path)
    with pytest.raises(
        ValueError,
        match="a series of 40 values is too short for context 64 \\+ horizon 16: "
        "the train, val, test split\\(s\\) get no window; need at least 115 values",
    ):
        track.make_data(Grid((64,)), 0, SIZES)
    constant = tmp_path / "constant.csv"
    constant.write_text("v\n" + "1\n" * 200)
    with pytest.raises(ValueError, match="is constant over the training part"):
        csv_sequence_track(constant).make_data(Grid((16,)), 0, SIZES)
    with pytest.raises(ValueError, match="no such file"):
        read_csv_series(tmp_path / "missing.csv")


def test_csv_track_registers_through_the_environment_and_a_bad_file_breaks_only_itself(
    tmp_path, registry_env
):
    good = tmp_path / "good.csv"
    good.write_text("t,y\n" + "".join(f"{i},{np.sin(i / 5):.4f}\n" for i in range(300)))
    registry_env.setenv(sequence_csv.ENV, str(good))
    registry_env.setenv(sequence_csv.TARGET_ENV, "y")
    registry = load_registry(refresh=True)
    track = registry.track("sequence-csv")
    assert track.plugin == "sequence-csv" and "column 'y'" in track.description
    data = track.make_data(Grid((32,)), 0, SIZES)
    validate_data(track, data, Grid((32,)))
    assert data.train.inputs.shape == (12, 1, 32) and data.test.targets.shape == (6, 16)
    bad = tmp_path / "bad.csv"
    bad.write_text("t,y\n1,2\n2,oops\n")
    registry_env.setenv(sequence_csv.ENV, str(bad))
    registry = load_registry(refresh=True)
    assert "sequence-csv" not in registry.tracks and "sequence" in registry.tracks
    assert [(b.name, b.error) for b in registry.broken] == [
        ("sequence-csv", f"ValueError: {bad}: row 3, column 'y': 'oops' is not a number")
    ]


def write_image_folder(root, classes=("blue", "red"), per_class=5):
    for k, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = np.zeros((10 + i, 14, 3), dtype=np.uint8)
            pixels[..., 2 * k] = 100 + 20 * i
            Image.fromarray(pixels).save(root / name / f"{i}.png")
    return root


def test_image_folder_loads_resizes_and_keeps_one_split_for_every_seed(tmp_path):
    track = image_folder.image_folder_track(write_image_folder(tmp_path / "pics"))
    assert [m.name for m in track.models] == [
        "vit",
        "vit-concentration",
        "mlp-mixer",
        "vit-concentration-uncapped",
        "vit-tokenwise",
    ]
    grid = Grid((8, 6))
    data = track.make_data(grid, 0, SIZES)
    validate_data(track, data, grid)
    assert (len(data.train), len(data.val), len(data.test)) == (6, 2, 2)
    assert data.train.inputs.shape == (6, 3, 8, 6) and data.train.targets.dtype == torch.int64
    assert torch.allclose(data.train.inputs.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-5)
    assert torch.equal(track.make_data(grid, 0, SIZES).test.inputs, data.test.inputs)
    # one fixed split: the paired test compares seeds on the same test images
    for seed in range(1, 4):
        other = track.make_data(grid, seed, SIZES)
        assert torch.equal(other.test.inputs, data.test.inputs) and torch.equal(
            other.train.targets, data.train.targets
        )
    model = track.model("vit").build(grid)
    assert model(data.train.inputs).shape == (6, 2)


def test_image_folder_errors_and_environment(tmp_path, registry_env):
    with pytest.raises(ValueError, match="is not a directory"):
        image_folder.image_folder_track(tmp_path / "missing")
    one = write_image_folder(tmp_path / "one", classes=("only",))
    with pytest.raises(
        ValueError, match=r"has 1 class folder\(s\) \['only'\]; classification needs at least 2"
    ):
        image_folder.image_folder_track(one)
    registry_env.setenv(image_folder.ENV, str(write_image_folder(tmp_path / "ok")))
    assert load_registry(refresh=True).track("image-folder").plugin == "image-folder"
    registry_env.setenv(image_folder.ENV, str(tmp_path / "missing"))
    registry = load_registry(refresh=True)
    assert "image" in registry.tracks and [b.name for b in registry.broken] == ["image-folder"]


def test_a_copy_of_the_same_data_elsewhere_is_split_the_same_way(tmp_path):
    """The fixed split follows the data, not where it lies: the same numbers from a copy in another
    folder."""
    first = write_image_folder(tmp_path / "a" / "pics", per_class=8)
    second = shutil.copytree(first, tmp_path / "somewhere" / "else")
    sizes, grid = DataSizes(6, 3, 3), Grid((4, 4))
    one, two = (
        image_folder.image_folder_track(root).make_data(grid, 0, sizes) for root in (first, second)
    )
    assert all(
        torch.equal(getattr(one, s).inputs, getattr(two, s).inputs)
        for s in ("train", "val", "test")
    )
    values = "value\n" + "\n".join(
        f"{v:.3f}" for v in np.random.default_rng(0).normal(size=200).cumsum()
    )
    paths = [tmp_path / "x.csv", tmp_path / "a" / "y.csv"]
    for path in paths:
        path.write_text(values)
    one, two = (
        csv_sequence_track(path).make_data(Grid((16,)), 0, DataSizes(20, 5, 5)) for path in paths
    )
    assert all(
        torch.equal(getattr(one, s).inputs, getattr(two, s).inputs)
        for s in ("train", "val", "test")
    )
