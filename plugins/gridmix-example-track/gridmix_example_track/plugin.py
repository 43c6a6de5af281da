"""The module the ``gridmix`` entry point names: the hook implementations of this plugin."""

from __future__ import annotations

from gridmix import ModelSpec, Track, hookimpl
from gridmix_example_track.conv_mixer import conv_baseline
from gridmix_example_track.heat import heat_track

# Tracks whose matched baseline is a timm VisionTransformer, so the conv mixer can replace its
# attention.
VIT_TRACKS = ("heat", "image", "image-folder")


@hookimpl
def gridmix_tracks() -> list[Track]:
    """Add the ``heat`` track."""
    return [heat_track()]


@hookimpl
def gridmix_models(track: Track) -> list[ModelSpec] | None:
    """Add the ``vit-dwconv`` baseline to every track built on a ViT (ours and gridmix's
    ``image``)."""
    return [conv_baseline(track)] if track.name in VIT_TRACKS else None
