"""Training precision: float32, or mixed precision (autocast) in bfloat16 or float16.

``gridmix run --precision`` chooses; ``auto`` (the default) is bf16 mixed precision on CUDA and
float32 on the CPU. Mixed precision keeps float32 parameters and optimiser state, runs matrix
products in the narrow dtype under ``torch.autocast``, and for float16 scales the loss
(``torch.amp.GradScaler``) so small gradients do not underflow. The mixer applies its operator in
float32 whatever the activations (:meth:`gridmix.ConcentrationMixer.mix`).
"""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("fp32", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(precision: str, device: str) -> str:
    """``auto`` → ``bf16`` on CUDA, ``fp32`` elsewhere; any other value is checked and returned."""
    if precision == "auto":
        return "bf16" if device == "cuda" else "fp32"
    if precision not in PRECISIONS:
        raise ValueError(
            f"precision {precision!r}; expected 'auto' or one of {', '.join(PRECISIONS)}"
        )
    return precision


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The forward's context: ``torch.autocast`` in the narrow dtype, or nothing for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=_DTYPES[precision])


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """A loss scaler, enabled for fp16 only (bf16 has float32's exponent range)."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")
