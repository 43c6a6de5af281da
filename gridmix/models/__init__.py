"""Model builders the tracks compose: timm image models on a token grid, and grid transformers for
any ``d``.

Every builder returns a plain ``nn.Module`` (no hidden state outside its parameters and buffers), so
the harness can count parameters and FLOPs of any model the same way. The idea model and its matched
baseline are always built by the same function with a different token mixer (docs/design.md section
3).
"""

from gridmix.models.grid_transformer import GridTransformer
from gridmix.models.mixer_config import BackboneConfig, MixerConfig
from gridmix.models.vit import build_mlp_mixer, build_vit, mlp_mixer_supports

__all__ = [
    "BackboneConfig",
    "GridTransformer",
    "MixerConfig",
    "build_mlp_mixer",
    "build_vit",
    "mlp_mixer_supports",
]
