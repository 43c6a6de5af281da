"""Data identity: a fingerprint of the data a study trains on, so a ledger never mixes two data
sets.

The fingerprint hashes the tensors the track generates (or loads) for the study's grid, its first
seed and the budget's split sizes, together with the plugin's name and version and, for a file-based
track (:attr:`gridmix.tracks.Track.source`), the bytes of its source file or folder. It enters every
run key and the study's identity in the ledger (docs/design.md section 6): a re-run on changed data
is refused with one line saying what changed, never answered with the old data's numbers. Hashing is
a single pass over the tensors and the source files, cheap next to training on them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from gridmix.core.grid import Grid
from gridmix.tracks import SPLIT_NAMES, DataSizes, Track, TrackData

_CHUNK = 1 << 20
HASH_CHARS = 16


def tensor_hash(data: TrackData) -> str:
    """SHA-256 over every split's inputs and targets: dtype, shape and raw bytes."""
    digest = hashlib.sha256()
    for split_name in SPLIT_NAMES:
        split = getattr(data, split_name)
        for tensor in (split.inputs, split.targets):
            flat = tensor.detach().contiguous().reshape(-1)
            digest.update(f"{split_name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
            digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:HASH_CHARS]


def source_hash(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes, or of a folder's files (relative path and bytes, in sorted
    order)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(f"{file.relative_to(path) if path.is_dir() else file.name};".encode())
        with file.open("rb") as handle:
            for chunk in iter(lambda handle=handle: handle.read(_CHUNK), b""):
                digest.update(chunk)
    return digest.hexdigest()[:HASH_CHARS]


def data_fingerprint(track: Track, grid: Grid, sizes: DataSizes, *, seed: int = 0) -> dict:
    """Build and validate ``track``'s data for ``(grid, seed, sizes)`` and describe it.

    Returns ``hash`` (the identity: tensors, plugin, version, source bytes), its parts, the source's
    absolute path (shown, not hashed: moving a file changes nothing), the actual split sizes and the
    track's description (shown, not hashed; for ``sequence-csv`` it names the target column and the
    input channels). Whatever the plugin raises while building its data propagates unchanged.
    """
    from gridmix.tracks.plugin_loader import validate_data

    data = validate_data(track, track.make_data(grid, seed, sizes), grid)
    parts = dict(
        tensors=tensor_hash(data),
        plugin=track.plugin,
        plugin_version=track.plugin_version,
        source_hash=source_hash(track.source) if track.source else None,
    )
    identity = hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()[:HASH_CHARS]
    # named, not hashed: the bytes are
    source = str(Path(track.source).resolve()) if track.source else None
    return dict(
        hash=identity,
        **parts,
        source=source,
        seed=seed,
        grid=str(grid),
        sizes={name: len(getattr(data, name)) for name in SPLIT_NAMES},
        description=track.description,
    )


def describe_change(previous: dict, current: dict) -> str:
    """What differs between two fingerprints, in words (empty when their hashes agree)."""
    if previous.get("hash") == current.get("hash"):
        return ""
    labels = dict(
        source="source",
        source_hash="source file hash",
        plugin="plugin",
        plugin_version="plugin version",
        tensors="data hash",
        sizes="split sizes",
    )
    changes = [
        f"{label} {previous.get(name)!s} → {current.get(name)!s}"
        for name, label in labels.items()
        if previous.get(name) != current.get(name)
    ]
    return "; ".join(changes) or f"data fingerprint {previous.get('hash')} → {current.get('hash')}"
