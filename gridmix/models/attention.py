"""Causal attention for the autoregressive baselines: :class:`gridmix.mixers.attention.CausalAttention`, timm's
``Attention`` with its mask fixed to causal (defined with the registered attention mixer)."""

from gridmix.mixers.attention import CausalAttention

__all__ = ["CausalAttention"]
