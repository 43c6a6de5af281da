"""Standard image benchmarks as tracks: MNIST, Fashion-MNIST, CIFAR-10/100 and SVHN from a local
root.

The data is read by ``torchvision.datasets`` from ``GRIDMIX_DATA_ROOT`` (``gridmix run --data-root
DIR``) in its standard on-disk format (MNIST's idx files under ``DIR/MNIST/raw``, CIFAR's pickled
batches under ``DIR/cifar-10-batches-py``, SVHN's ``.mat`` files); nothing is downloaded unless
``GRIDMIX_DOWNLOAD=1`` (``--download``). The tracks are always listed, and ``gridmix tracks`` says
whether each one's files were found; nothing is read until the track is used, and unreadable files
(missing, wrong format, a corrupt batch) are a one-line ``ValueError`` from ``make_data``.

The split is fixed per dataset: test is the dataset's own test set, validation a fixed slice of its
training set (the same for every seed), training the rest; seeds vary only initialisation and order.
Each split is capped at the budget's sizes (the first samples of a fixed permutation, so a smaller
budget sees a subset).

The patch size comes from the environment (``GRIDMIX_PATCH``, default 4): an image is resized to
``grid × patch`` pixels and each ``patch × patch`` block becomes one token with ``channels ·
patch²`` features (space-to-depth), so CIFAR's 32x32 pixels are an 8x8 grid. Channels are
standardised with the training split's statistics.

Shape legend:
    S: samples; C: image channels; p: patch; H, W: the grid; inputs (S, C·p², H, W) float32,
    targets (S,) int64
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torchvision import datasets

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes, Split, Track, TrackData
from gridmix_tracks.common import accuracy, cross_entropy
from gridmix_tracks.image import ImageModels

ROOT_ENV = "GRIDMIX_DATA_ROOT"
DOWNLOAD_ENV = "GRIDMIX_DOWNLOAD"
PATCH_ENV = "GRIDMIX_PATCH"
VAL_FRACTION = 0.1  # of the dataset's training set, fixed for every seed
# up to 30 epochs, stopped after 5 without a better validation accuracy (the best epoch's weights
# restored)
BUDGET_OVERRIDES = {
    "default": {
        "n_train": 4096,
        "n_val": 512,
        "epochs": 30,
        "patience": 5,
        "batch_size": 32,
        "lrs": (1e-3, 3e-3, 1e-2),
        "sweep_seeds": 1,
    }
}


@dataclass(frozen=True)
class DatasetSpec:
    """One torchvision data set: its track name, class, pixel size, channels, classes and split
    argument."""

    track: str
    cls: type
    pixels: int
    channels: int
    num_classes: int
    split_arg: str  # "train" (a bool argument) or "split" (SVHN's "train"/"test")


DATASETS = (
    DatasetSpec("mnist", datasets.MNIST, 28, 1, 10, "train"),
    DatasetSpec("fashion-mnist", datasets.FashionMNIST, 28, 1, 10, "train"),
    DatasetSpec("cifar10", datasets.CIFAR10, 32, 3, 10, "train"),
    DatasetSpec("cifar100", datasets.CIFAR100, 32, 3, 100, "train"),
    DatasetSpec("svhn", datasets.SVHN, 32, 3, 10, "split"),
)


def unchecked(cls: type) -> type:
    """CIFAR class ``cls`` with its md5 checks reduced to "the file exists": the test seam for tiny
    batches.

    torchvision compares each batch's and the metadata's md5 with the real files'; with ``md5=None``
    its own ``check_integrity`` only checks that the file exists, and all the parsing stays
    torchvision's.
    """
    return type(
        f"Unchecked{cls.__name__}",
        (cls,),
        {
            "train_list": [[name, None] for name, _ in cls.train_list],
            "test_list": [[name, None] for name, _ in cls.test_list],
            "meta": {**cls.meta, "md5": None},
        },
    )


def _read(
    spec: DatasetSpec, cls: type, root: str, train: bool, download: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """All images of one official split as uint8 (S, C, P, P) and int64 labels (S,); ``ValueError``
    if unreadable."""
    if not root:
        raise ValueError(
            f"{spec.track} needs data: give --data-root DIR (or {ROOT_ENV}) holding torchvision's "
            f"{spec.cls.__name__} files (--download fetches them)"
        )
    if not download and not Path(root).is_dir():
        raise ValueError(
            f"{spec.track}: data root {root!r} is not a directory (give --data-root DIR, or "
            "--download)"
        )
    kwargs = (
        {"train": train} if spec.split_arg == "train" else {"split": "train" if train else "test"}
    )
    try:
        dataset = cls(root, download=download, **kwargs)
    # torchvision's parsers fail in many ways (assert, pickle, reshape): all bad files
    except Exception as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(
            f"{spec.track}: cannot read the {'training' if train else 'test'} set under {root!r}: "
            f"{reason} (expected torchvision's {cls.__name__} files; --download fetches them)"
        ) from None
    images = np.asarray(dataset.data)
    labels = torch.as_tensor(
        np.asarray(dataset.targets if hasattr(dataset, "targets") else dataset.labels),
        dtype=torch.int64,
    )
    if images.ndim == 3:  # MNIST-like (S, P, P)
        images = images[:, None]
    # CIFAR (S, P, P, C)
    elif images.shape[-1] == spec.channels and images.shape[1] != spec.channels:
        images = images.transpose(0, 3, 1, 2)
    if (
        images.ndim != 4
        or images.shape[1] != spec.channels
        or len(images) != len(labels)
        or len(images) == 0
    ):
        raise ValueError(
            f"{spec.track}: the files under {root!r} hold images of shape {images.shape} and "
            f"{len(labels)} labels; expected (S, {spec.channels}, {spec.pixels}, {spec.pixels}), "
            "S > 0"
        )
    if labels.min() < 0 or labels.max() >= spec.num_classes:
        raise ValueError(
            f"{spec.track}: labels under {root!r} span "
            f"{labels.min().item()}..{labels.max().item()}; expected 0..{spec.num_classes - 1}"
        )
    return torch.as_tensor(np.ascontiguousarray(images)), labels


@functools.lru_cache(maxsize=4)
def _load(spec: DatasetSpec, cls: type, root: str, download: bool):
    """Both official splits, read once per process."""
    return _read(spec, cls, root, True, download), _read(spec, cls, root, False, download)


def to_tokens(images: torch.Tensor, grid: Grid, patch: int) -> torch.Tensor:
    """uint8 images (S, C, P, P) → float (S, C·p², H, W): resized to (H·p, W·p), each p×p block one
    token."""
    H, W = grid.shape
    x = images.float() / 255.0  # (S, C, P, P)
    if x.shape[-2:] != (H * patch, W * patch):
        x = F.interpolate(
            x, size=(H * patch, W * patch), mode="bilinear", align_corners=False, antialias=True
        )
    return F.pixel_unshuffle(x, patch)  # (S, C·p², H, W)


@dataclass(frozen=True)
class TorchvisionSource:
    """Where one data set lives and how it is read; ``load`` is the track's ``make_data``."""

    spec: DatasetSpec
    root: str
    download: bool = False
    patch: int = 4
    cls: type | None = (
        None  # the dataset class; defaults to the spec's (tests pass :func:`unchecked`)
    )

    def __post_init__(self) -> None:
        if self.patch < 1:
            raise ValueError(f"{PATCH_ENV}={self.patch}; expected a patch size >= 1")

    def missing(self) -> str | None:
        """``None`` when the data set's files are under the root (a cheap look, nothing is read),
        else why not."""
        if not self.root:
            return f"needs --data-root DIR (or {ROOT_ENV})"
        cls = self.spec.cls
        folder = getattr(cls, "base_folder", None) or cls.__name__ + "/raw"
        if (Path(self.root) / ("train_32x32.mat" if cls is datasets.SVHN else folder)).exists():
            return None
        return f"not found in {self.root}" + (
            " (--download fetches it)" if not self.download else ""
        )

    def where(self) -> str:
        """Whether the data set's files are under the root, in words."""
        return self.missing() or f"found in {self.root}"

    def load(self, grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        """The fixed split (``seed`` is unused: seeds vary training only), as tokens on ``grid``."""
        del seed
        (train_x, train_y), (test_x, test_y) = _load(
            self.spec, self.cls or self.spec.cls, self.root, self.download
        )
        order = np.random.default_rng(0).permutation(len(train_x))
        n_val = max(1, round(VAL_FRACTION * len(order)))
        if len(order) - n_val < 1:
            raise ValueError(
                f"{self.spec.track}: {len(order)} training images leave none for training"
            )
        val_i, train_i = order[:n_val][: sizes.n_val], order[n_val:][: sizes.n_train]
        test_i = np.random.default_rng(1).permutation(len(test_x))[: sizes.n_test]
        raw = {
            "train": (train_x[train_i], train_y[train_i]),
            "val": (train_x[val_i], train_y[val_i]),
            "test": (test_x[test_i], test_y[test_i]),
        }
        tokens = {split: to_tokens(x, grid, self.patch) for split, (x, _) in raw.items()}
        mean = tokens["train"].mean(dim=(0, 2, 3), keepdim=True)
        std = tokens["train"].std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
        return TrackData(
            **{
                split: Split(inputs=(tokens[split] - mean) / std, targets=raw[split][1])
                for split in raw
            }
        )


def torchvision_track(
    spec: DatasetSpec, root: str, *, download: bool = False, patch: int = 4, cls: type | None = None
) -> Track:
    """The classification track for ``spec`` read from ``root`` (lazily: nothing is read until it is
    used)."""
    source = TorchvisionSource(spec, root, download=download, patch=patch, cls=cls)
    side = max(1, spec.pixels // patch)
    return Track(
        name=spec.track,
        description=f"classify {spec.cls.__name__} ({spec.num_classes} classes, {spec.pixels}px, "
        f"patch {patch}; {source.where()})",
        ndim=2,
        default_grid=Grid((side, side)),
        make_data=source.load,
        loss=cross_entropy,
        metric=accuracy,
        fixed_split=True,  # one dataset, one split: seeds vary initialisation and batch order
        metric_name="accuracy",
        direction="higher",
        models=ImageModels(
            in_chans=spec.channels * patch * patch, num_classes=spec.num_classes
        ).specs(),
        backbone=ImageModels(
            in_chans=spec.channels * patch * patch, num_classes=spec.num_classes
        ).backbone_spec(),
        matched_baseline="vit",
        chance=1
        / spec.num_classes,  # for balanced classes; the report's majority-class reference is exact
        ceiling=1.0,
        budget_overrides=BUDGET_OVERRIDES,
        data_missing=source.missing,
        fixed_grid=None,  # the same images, resized to grid × patch pixels, on every grid
    )


def _patch_from_env() -> int:
    text = os.environ.get(PATCH_ENV, "").strip() or "4"
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{PATCH_ENV}={text!r}; expected an integer patch size, e.g. 4") from None


@hookimpl
def gridmix_tracks() -> list[Track]:
    """MNIST, Fashion-MNIST, CIFAR-10/100 and SVHN, read from ``GRIDMIX_DATA_ROOT`` when they are
    used."""
    root = os.environ.get(ROOT_ENV, "").strip()
    download = os.environ.get(DOWNLOAD_ENV, "").strip() == "1"
    patch = _patch_from_env()
    return [torchvision_track(spec, root, download=download, patch=patch) for spec in DATASETS]
