"""The torchvision data-set tracks read tiny files in the real on-disk formats through torchvision's
own loaders."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest
import torchvision.datasets as tvd
from gridmix_tracks.torchvision_sets import DATASETS, torchvision_track, unchecked
from typer.testing import CliRunner

from gridmix.cli.app import app
from gridmix.tracks import DataSizes
from gridmix.tracks.plugin_loader import load_registry

SPECS = {spec.track: spec for spec in DATASETS}
SIZES = DataSizes(n_train=100, n_val=100, n_test=100)


def write_idx(path, array: np.ndarray) -> None:
    """MNIST's idx format: zero, zero, type code 0x08 (uint8), rank; big-endian int32 sizes; the
    bytes."""
    path.write_bytes(
        struct.pack(">BBBB", 0, 0, 8, array.ndim)
        + struct.pack(f">{array.ndim}I", *array.shape)
        + array.astype(np.uint8).tobytes()
    )


def write_mnist(root, folder: str = "MNIST", n_train: int = 30, n_test: int = 12) -> None:
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", np.arange(n) % 10)


def write_cifar10(root, per_batch: int = 6) -> None:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            "data": rng.integers(0, 256, (per_batch, 3 * 32 * 32), dtype=np.uint8),
            "labels": list(rng.integers(0, 10, per_batch)),
        }
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(
        pickle.dumps({"label_names": [f"c{i}" for i in range(10)]})
    )


def test_mnist_idx_files_become_a_fixed_split_of_patch_tokens(tmp_path):
    write_mnist(tmp_path)
    track = torchvision_track(SPECS["mnist"], str(tmp_path))
    assert str(track.default_grid) == "7x7" and "found in" in track.description
    assert track.data_missing() is None and track.chance == 0.1
    data = track.make_data(track.default_grid, 0, SIZES)
    assert data.train.inputs.shape == (
        27,
        16,
        7,
        7,
    )  # 30 training images, 3 held out for validation
    assert (len(data.val), len(data.test)) == (3, 12)
    # the official test set
    assert sorted(data.test.targets.tolist()) == sorted((np.arange(12) % 10).tolist())
    other = track.make_data(track.default_grid, 5, SIZES)
    assert all(
        (getattr(data, s).targets == getattr(other, s).targets).all()
        for s in ("train", "val", "test")
    )


def test_patch_size_comes_from_the_environment(tmp_path):
    write_mnist(tmp_path, folder="FashionMNIST")
    track = torchvision_track(SPECS["fashion-mnist"], str(tmp_path), patch=2)
    assert str(track.default_grid) == "14x14"
    assert track.make_data(track.default_grid, 0, SIZES).test.inputs.shape == (12, 4, 14, 14)


def test_cifar_batches_through_the_md5_seam(tmp_path):
    write_cifar10(tmp_path)
    real = torchvision_track(SPECS["cifar10"], str(tmp_path))
    # torchvision's md5 check rejects tiny batches
    with pytest.raises(ValueError, match="corrupted") as error:
        real.make_data(real.default_grid, 0, SIZES)
    assert "\n" not in str(error.value)
    track = torchvision_track(SPECS["cifar10"], str(tmp_path), cls=unchecked(tvd.CIFAR10))
    data = track.make_data(track.default_grid, 0, SIZES)
    assert data.train.inputs.shape == (27, 48, 8, 8) and len(data.test) == 6
    # standardised with training statistics
    assert data.train.inputs.mean(dim=(0, 2, 3)).abs().max() < 1e-4


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_bad_cifar_batch_is_one_line(tmp_path, damage):
    write_cifar10(tmp_path)
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    batch.write_bytes(b"not a pickle") if damage == "corrupt" else batch.unlink()
    track = torchvision_track(SPECS["cifar10"], str(tmp_path), cls=unchecked(tvd.CIFAR10))
    with pytest.raises(ValueError, match="cifar10: cannot read the training set") as error:
        track.make_data(track.default_grid, 0, SIZES)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("root", "expected"),
    [("", "needs data: give --data-root"), ("/no/such/dir", "is not a directory")],
)
def test_missing_root_is_one_line(root, expected):
    track = torchvision_track(SPECS["svhn"], root)
    # listed as lacking its data (`gridmix tracks`; CI's bench skips it)
    assert track.data_missing()
    with pytest.raises(ValueError, match=expected):
        track.make_data(track.default_grid, 0, SIZES)


def test_wrong_format_is_one_line(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "MNIST" / "raw" / "t10k-images-idx3-ubyte").write_bytes(b"\x00\x00\x08")
    track = torchvision_track(SPECS["mnist"], str(tmp_path))
    with pytest.raises(ValueError, match="mnist: cannot read the test set") as error:
        track.make_data(track.default_grid, 0, SIZES)
    assert "\n" not in str(error.value)


def test_cli_runs_mnist_from_data_root(tmp_path, monkeypatch):
    write_mnist(tmp_path / "data", n_train=60, n_test=20)
    monkeypatch.delenv("GRIDMIX_DATA_ROOT", raising=False)
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--track",
            "mnist",
            "--data-root",
            str(tmp_path / "data"),
            "--budget",
            "smoke",
            "--models",
            "vit",
            "--no-scaling",
            "--out",
            str(tmp_path / "out"),
        ],
        env={"COLUMNS": "200"},
    )
    load_registry(refresh=True)
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| majority class | 0.1 |" in markdown  # 2 of 20 test labels
    assert "the inference is conditional on this dataset" in markdown  # MNIST's one fixed split


def test_cli_without_data_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("GRIDMIX_DATA_ROOT", raising=False)
    load_registry(refresh=True)
    result = CliRunner().invoke(
        app, ["run", "--track", "cifar10", "--budget", "smoke", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "needs data: give --data-root" in result.output


def test_data_option_only_for_data_tracks(tmp_path):
    result = CliRunner().invoke(
        app, ["run", "--track", "image", "--data", str(tmp_path), "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--data is for the tracks" in result.output
