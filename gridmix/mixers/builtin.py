"""The built-in token mixers, registered through the ``gridmix_mixers`` hook like any plugin's (the
``mixers`` entry point of the gridmix distribution): attention, the concentration mixer, its
ablation and the no-mixing control, and the structured peers, each with its paper and declared
capabilities (docs/mixers.md). :data:`BUILTIN` is their table, from which the built-in tracks and
:class:`~gridmix.models.mixer_config.MixerConfig` build their models."""

from __future__ import annotations

import copy

from torch import nn

from gridmix.core.grid import Grid
from gridmix.core.markers import hookimpl
from gridmix.mixers.attention import build_attention
from gridmix.mixers.axial import build_axial_attention, build_divided_attention, regrid_lines
from gridmix.mixers.concentration.layer import ConcentrationMixer
from gridmix.mixers.concentration.mechanism import combine_signatures, mechanism_signature
from gridmix.mixers.contract import MixerSpec, MixerTable
from gridmix.mixers.global_filter import build_global_filter, regrid_global_filter
from gridmix.mixers.hyena import build_hyena, regrid_hyena
from gridmix.mixers.linear_attention import build_linear_attention, regrid_linear_attention
from gridmix.mixers.mamba import build_mamba, regrid_mamba
from gridmix.mixers.neighbourhood import (
    build_neighbourhood_attention,
    regrid_neighbourhood_attention,
)
from gridmix.mixers.s4nd import build_s4nd, regrid_s4nd
from gridmix.mixers.token_mlp import MAX_TOKENS, build_token_mlp
from gridmix.mixers.tokenwise import TokenwiseMixer


def build_concentration(dim: int, grid: Grid, **mixer_kwargs) -> nn.Module:
    """:class:`~gridmix.mixers.concentration.layer.ConcentrationMixer` (the contract's keyword
    arguments and the mixer_kwargs are its own)."""
    return ConcentrationMixer(dim, grid, **mixer_kwargs)


def build_uncapped(dim: int, grid: Grid, **arguments) -> nn.Module:
    """The concentration mixer without its eigenvalue cap (``spectrum="uncapped"``): the idea's
    ablation."""
    return build_concentration(dim, grid, **{**arguments, "spectrum": "uncapped"})


def build_tokenwise(dim: int, grid: Grid, **mixer_kwargs) -> nn.Module:
    """:class:`~gridmix.mixers.tokenwise.TokenwiseMixer`: ``W_o W_v`` per token, no mixing (causal
    on any axis; the contract's keyword arguments and the mixer_kwargs are its own)."""
    return TokenwiseMixer(dim, grid, **mixer_kwargs)


def _regrid_concentration(module: nn.Module, grid: Grid) -> nn.Module:
    return module.regrid(grid)


def _regrid_free(module: nn.Module, grid: Grid) -> nn.Module:
    """A mixer with no parameter or shape tied to the grid: the same module serves any grid."""
    return module


def _regrid_tokenwise(module: TokenwiseMixer, grid: Grid) -> TokenwiseMixer:
    """The control on another grid: its parameters copied, only the token count it checks
    changes."""
    moved = copy.deepcopy(module)
    moved.grid = Grid.parse(grid)
    return moved


CONCENTRATION = dict(
    grid_ranks=None,
    causal="any",
    prefix_tokens=True,
    regrid=_regrid_concentration,
    mechanism=mechanism_signature,
    combine_mechanism=combine_signatures,
)

MIXERS = (
    MixerSpec(
        "attention",
        build_attention,
        description="multi-head softmax attention over every token (timm, fused)",
        reference="Vaswani et al. 2017",
        causal="first",
        prefix_tokens=True,
        regrid=_regrid_free,
    ),
    MixerSpec(
        "concentration",
        build_concentration,
        description="Kronecker product of per-axis factors U diag(λ) Uᵀ, certified ‖M‖₂ < 1",
        reference="gridmix (docs/design.md section 2)",
        ablation="concentration-uncapped",
        **CONCENTRATION,
    ),
    MixerSpec(
        "concentration-uncapped",
        build_uncapped,
        description="the concentration mixer without its eigenvalue cap (its ablation)",
        reference="gridmix",
        **CONCENTRATION,
    ),
    MixerSpec(
        "tokenwise",
        build_tokenwise,
        description="no token mixing, W_o W_v per token (the control)",
        reference="gridmix",
        causal="any",
        prefix_tokens=True,
        regrid=_regrid_tokenwise,
    ),
    MixerSpec(
        "global-filter",
        build_global_filter,
        description="N-d FFT, a learned complex filter per channel and frequency, inverse FFT",
        reference="GFNet, Rao et al. 2021",
        prefix_tokens=True,
        regrid=regrid_global_filter,
    ),
    MixerSpec(
        "s4nd",
        build_s4nd,
        description="per-axis diagonal state-space (S4D) kernels, their outer product by "
        "zero-padded FFT; exactly causal on causal axes",
        reference="S4ND, Nguyen et al. 2022",
        causal="any",
        prefix_tokens=True,
        regrid=regrid_s4nd,
    ),
    MixerSpec(
        "token-mlp",
        build_token_mlp,
        description="an MLP across the grid tokens, per channel",
        reference="MLP-Mixer, Tolstikhin et al. 2021",
        prefix_tokens=True,
        max_tokens=MAX_TOKENS,
    ),
    MixerSpec(
        "neighbourhood-attention",
        build_neighbourhood_attention,
        description="attention within a window of k tokens per axis, shifted inward at the borders",
        reference="NATTEN, Hassani et al. 2023",
        causal="any",
        prefix_tokens=True,
        regrid=regrid_neighbourhood_attention,
    ),
    MixerSpec(
        "axial-attention",
        build_axial_attention,
        description="attention along each grid axis in turn",
        reference="Ho et al. 2019",
        causal="any",
        regrid=regrid_lines,
    ),
    MixerSpec(
        "divided-attention",
        build_divided_attention,
        description="attention along time per location, then over space per frame",
        reference="TimeSformer, Bertasius et al. 2021",
        grid_ranks=(2, 3, 4),
        causal="first",
        regrid=regrid_lines,
    ),
    MixerSpec(
        "linear-attention",
        build_linear_attention,
        description="softmax-free attention with elu + 1 features; causal by prefix sums",
        reference="Katharopoulos et al. 2020",
        causal="first",
        prefix_tokens=True,
        regrid=regrid_linear_attention,
    ),
    MixerSpec(
        "mamba",
        build_mamba,
        description="Mamba-2 (SSD) selective scans along every axis, both ways (forward only on "
        "causal axes), averaged",
        reference="Mamba-2, Dao & Gu 2024; VMamba, Liu et al. 2024",
        causal="any",
        prefix_tokens=True,
        regrid=regrid_mamba,
    ),
    MixerSpec(
        "hyena",
        build_hyena,
        description="gated long convolution, its filter an MLP of positions times a decay, by "
        "zero-padded FFT over every axis",
        reference="Hyena, Poli et al. 2023",
        causal="any",
        prefix_tokens=True,
        regrid=regrid_hyena,
    ),
)

BUILTIN = MixerTable({spec.name: spec for spec in MIXERS})


@hookimpl
def gridmix_mixers() -> list[MixerSpec]:
    """The built-in mixers."""
    return list(MIXERS)
