"""Linear (zero-padded) convolution over grid axes by FFT, without transforming the padding's zeros.

A linear convolution of an axis of length ``n`` with a filter of lags ``−(n − 1) … n − 1`` is the
circular convolution of the axis zero-padded to ``2 n``, cropped back to its first ``n`` outputs.
``torch.fft.rfftn(x, s=…)`` transforms the padded tensor axis by axis, so every axis it transforms
after the first runs over the other axes' zeros too, and ``irfftn`` computes outputs that the crop
throws away. :func:`padded_spectrum` and :func:`cropped_inverse` are the same two maps, one axis at
a time: the forward transforms each axis while the axes after it in the order are still ``n`` long,
the inverse crops each axis right after its transform. On a grid of equal sides that skips about a
quarter of the transform work each way at 2-d and about two fifths at 3-d (a real FFT counted as
half a complex one); the results differ from ``rfftn`` / ``irfftn`` by float round-off only.
Autograd runs through torch's FFTs.

Shape legend:
    n_k: the length of axis ``dims[k]``; F: the spectrum (``2 n_k`` on every axis but the last of
    ``dims``, ``n_k + 1`` there)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def padded_spectrum(x: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    """``torch.fft.rfftn(x, s=[2 n_k …], dim=dims)``: the real FFT of ``x`` zero-padded to twice
    its length on every axis of ``dims`` (the last of them halved, as ``rfftn``'s).

    The last axis of ``dims`` first (``rfft``), then the others from last to first (``fft``), each
    over a tensor whose axes not yet transformed are not yet padded."""
    dims = list(dims)
    last = dims[-1]
    spectrum = torch.fft.rfft(x, n=2 * x.shape[last], dim=last)  # (…, n_k + 1 on the last)
    for dim in reversed(dims[:-1]):
        spectrum = torch.fft.fft(spectrum, n=2 * x.shape[dim], dim=dim)  # (…, 2 n_k at dim, …)
    return spectrum


def cropped_inverse(
    spectrum: torch.Tensor, dims: Sequence[int], lengths: Sequence[int]
) -> torch.Tensor:
    """``torch.fft.irfftn(spectrum, s=[2 n_k …], dim=dims)`` narrowed to the first ``lengths[k]``
    entries of every axis ``dims[k]``: the linear convolution's outputs (real).

    The axes of ``dims`` but the last first (``ifft``), each cropped right after its transform,
    then the last (``irfft``)."""
    dims = list(dims)
    for dim, n in zip(dims[:-1], lengths[:-1]):
        spectrum = torch.fft.ifft(spectrum, dim=dim).narrow(dim, 0, n)  # (…, n_k at dim, …)
    last, n = dims[-1], lengths[-1]
    return torch.fft.irfft(spectrum, n=2 * n, dim=last).narrow(last, 0, n)  # (…, n_k, …)
