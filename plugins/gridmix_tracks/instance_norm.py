"""Instance normalisation of each input window (RevIN without its affine parameters) for real
forecasting.

A trending or level-shifting series leaves the range of the training windows by the test part, where
a model that sees raw (globally standardised) values extrapolates badly; persistence does not care.
:class:`RevIN` subtracts each window's mean and divides by its standard deviation before the model
and undoes both on the forecast (Kim et al., ICLR 2022, "Reversible instance normalization"), so
every model forecasts the shape of the window's continuation. It has no parameters: the idea and its
matched baseline are wrapped alike.

Shape legend: S windows, L context, H horizon; inputs (S, 1, L), forecasts (S, H)
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from gridmix.tracks import Backbone, ModelSpec


class RevIN(nn.Module):
    def __init__(self, model: nn.Module, eps: float = 1e-5) -> None:
        super().__init__()
        self.model, self.eps = model, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)  # (S, 1, 1)
        std = x.std(dim=-1, keepdim=True, unbiased=False) + self.eps  # (S, 1, 1)
        y = self.model((x - mean) / std)  # (S, H)
        return y * std[:, 0] + mean[:, 0]  # (S, H)


def with_instance_norm(specs: tuple[ModelSpec, ...]) -> tuple[ModelSpec, ...]:
    """The same models, each built inside :class:`RevIN` (their keyword arguments pass through)."""

    def wrap(spec: ModelSpec) -> ModelSpec:
        return dataclasses.replace(
            spec,
            build=lambda grid, **model_kwargs: RevIN(spec.build(grid, **model_kwargs)),
            description=f"{spec.description}; inputs instance-normalised per window (RevIN)",
        )

    return tuple(wrap(spec) for spec in specs)


def backbone_with_instance_norm(backbone: Backbone) -> Backbone:
    """The same backbone, every model it builds inside :class:`RevIN` (as :func:`with_instance_norm`
    its specs)."""
    return dataclasses.replace(
        backbone,
        build=lambda grid, attn_layer, **model_kwargs: RevIN(
            backbone.build(grid, attn_layer, **model_kwargs)
        ),
    )
