"""The S4ND mixer: a multidimensional diagonal state-space convolution as a token mixer on an N-d
grid.

Follows Nguyen et al. 2022, "S4ND: Modeling Images and Videos as Multidimensional Signals Using
State Spaces", with the per-axis kernels of S4D (Gu et al. 2022, "On the Parameterization and
Initialization of Diagonal State Space Models"). Per grid axis ``k`` and channel, a diagonal SSM
gives the kernel over the axis length ``n_k``

    K[l] = 2 Re( Σ_s C_s · (exp(Δ A_s) − 1) / A_s · exp(Δ A_s l) ),   l = 0 … n_k − 1,

(B = 1 absorbed into C; the factor 2 is the conjugate pair of each of the ``d_state / 2`` complex
modes, as S4D's ``2 * einsum(...).real``) with S4D-Lin initialisation ``A_s = −1/2 + iπs``, ``Δ =
exp(log_dt)`` log-uniform in [0.001, 0.1] and complex ``C ~ randn``. The N-d kernel is the outer
product of the per-axis kernels, so the convolution is one 1-d convolution per axis (a mode
product), all linear (zero-padded), never circular:

- a non-causal axis has a bidirectional kernel, as S4's ``bidirectional=True`` (its SSM with two
  output channels): the forward kernel on lags ``l ≥ 0`` and a backward kernel with its own ``C``
  (``A`` and ``Δ`` shared) on lags ``l < 0`` (lag ``−l`` takes ``K_back[l − 1]``). These axes are
  applied together by one FFT, each axis padded to ``2 n_k`` (:mod:`gridmix.mixers.fft_conv`);
- a causal axis has the forward kernel only, applied by the exactly causal Toeplitz product
  (:func:`gridmix.mixers.concentration.ops.causal.causal_mode_product`): a later input has exactly
  zero gradient, whatever ``is_causal`` says.

The layer is S4's block, simplified: ``y = W_o · GELU(K ∗ u + D ⊙ u) + b_o`` on the grid tokens
(``D`` a per-channel skip; no input projection, no GLU, no dropout). Prefix tokens (class / register
tokens) are not on the grid: they pass through unchanged.

Resolution change (:func:`regrid_s4nd`): the kernels are those of a continuous signal, so on another
grid the same parameters are used with each axis's step scaled by ``old_length / new_length`` (the
buffer ``dt_scale``): the kernel spans the same continuous extent of the axis. The same grid gives
the same mixer bit for bit.

Shape legend:
    B: batch, P: prefix tokens, N: grid tokens (n_1·…·n_d), C: channels,
    S: complex modes (d_state / 2), n: an axis length,
    D: kernel directions (2 bidirectional, 1 causal), F: an axis's spectrum length
"""

from __future__ import annotations

import math

import torch
from torch import nn

from gridmix.core.grid import GridLike
from gridmix.mixers.concentration.ops.causal import causal_mode_product
from gridmix.mixers.contract import check_mixer_input, taken
from gridmix.mixers.fft_conv import cropped_inverse, padded_spectrum
from gridmix.mixers.grids import GridMixer, factory_kwargs, mix_grid_tokens

DT_MIN, DT_MAX = 0.001, 0.1  # S4D: log_dt uniform in [log 0.001, log 0.1]


def _check_d_state(d_state) -> None:
    """``d_state`` an even integer >= 2; ``ValueError`` otherwise."""
    if isinstance(d_state, bool) or not isinstance(d_state, int) or d_state < 2 or d_state % 2:
        raise ValueError(
            f"d_state={d_state!r}; expected an even integer >= 2 (d_state / 2 complex modes)"
        )


class S4DKernel(nn.Module):
    """One axis's diagonal SSM kernels per channel (S4D-Lin), in ``directions`` (2: forward and
    backward, 1: forward).

    Parameters: ``log_dt`` (C,), ``log_A_real`` (C, S) and ``A_imag`` (C, S) with ``A =
    −exp(log_A_real) + i A_imag``, and ``C`` (D, C, S, 2) (real and imaginary parts, one set per
    direction). The buffer ``dt_scale`` (a scalar, 1 on the grid the mixer was built for) multiplies
    the step: :func:`regrid_s4nd` sets it.
    """

    def __init__(
        self, channels: int, d_state: int, directions: int, *, device=None, dtype=None
    ) -> None:
        super().__init__()
        modes = d_state // 2
        factory = dict(device=device, dtype=dtype)
        u = torch.rand(channels, **factory)  # (C,)
        # (C,)
        self.log_dt = nn.Parameter(u * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
        # (C, S): Re A = -1/2
        self.log_A_real = nn.Parameter(torch.full((channels, modes), math.log(0.5), **factory))
        imag = math.pi * torch.arange(modes, **factory)  # (S,): Im A = π s
        self.A_imag = nn.Parameter(imag.repeat(channels, 1))  # (C, S)
        # complex randn: real and imaginary parts N(0, 1/2), as torch.randn(..., dtype=torch.cfloat)
        self.C = nn.Parameter(
            torch.randn(directions, channels, modes, 2, **factory) * math.sqrt(0.5)
        )  # (D, C, S, 2)
        self.register_buffer("dt_scale", torch.ones((), **factory))  # ()
        self.directions = directions

    def kernels(self, length: int, dtype: torch.dtype) -> torch.Tensor:
        """The kernels over lags ``0 … length − 1`` per direction and channel: (D, C, n), real, in
        ``dtype``."""
        dt = self.log_dt.to(dtype).exp() * self.dt_scale.to(dtype)  # (C,)
        A = torch.complex(-self.log_A_real.to(dtype).exp(), self.A_imag.to(dtype))  # (C, S)
        dtA = A * dt[:, None]  # (C, S)
        C = torch.view_as_complex(self.C.to(dtype).contiguous())  # (D, C, S)
        weights = C * ((dtA.exp() - 1) / A)  # (D, C, S)
        lags = torch.arange(length, device=dt.device, dtype=dtype)  # (n,)
        vandermonde = torch.exp(dtA[..., None] * lags)  # (C, S, n)
        return 2 * torch.einsum("dcs,csl->dcl", weights, vandermonde).real  # (D, C, n)

    def extra_repr(self) -> str:
        return (
            f"channels={self.log_dt.shape[0]}, modes={self.A_imag.shape[1]}, "
            f"directions={self.directions}"
        )


class S4NDMixer(GridMixer):
    """S4ND on ``grid`` (module docstring); timm's ``attn_layer`` contract through
    :class:`~gridmix.mixers.grids.GridMixer`.

    Args:
        dim: channels ``C``.
        grid: the grid, e.g. ``"8x16x16"``.
        d_state: the SSM state size per channel and axis (``d_state / 2`` complex conjugate pairs).
        proj_bias: the bias of the output projection ``W_o``.
        grid_kwargs: :class:`~gridmix.mixers.grids.GridMixer`'s: ``causal_axes`` (axes on which no
            token sees a later one, exactly), ``num_prefix_tokens`` (passed through unchanged),
            ``device`` and ``dtype`` (of the parameters).
    """

    expected, described = "an S4NDMixer", "the {d}-d S4ND mixer on {grid}"

    def __init__(
        self, dim: int, grid: GridLike, *, d_state: int = 16, proj_bias: bool = True, **grid_kwargs
    ) -> None:
        super().__init__(dim, grid, {}, **grid_kwargs)
        _check_d_state(d_state)
        self.d_state = d_state
        factory = factory_kwargs(grid_kwargs)
        self.axis_kernels = nn.ModuleList(
            S4DKernel(dim, d_state, 1 if axis in self.causal_axes else 2, **factory)
            for axis in range(self.grid.ndim)
        )
        self.D = nn.Parameter(torch.randn(dim, **factory))  # (C,): S4's skip, randn as S4D
        self.act = nn.GELU()
        self.proj = nn.Linear(dim, dim, bias=proj_bias, **factory)  # W_o

    def mix(self, u: torch.Tensor) -> torch.Tensor:
        """The bare convolution ``K ∗ u`` (no skip, activation or projection): (B, *grid, C) → (B,
        *grid, C), in ``u``'s dtype (float32 or float64)."""
        y = u  # (B, *grid, C)
        symmetric = [k for k in range(self.grid.ndim) if k not in self.causal_axes]
        if symmetric:
            dims = [k + 1 for k in symmetric]
            # (B, …, F_k, …, C): F_k = 2 n_k, n_k + 1 on the last
            spectrum = padded_spectrum(y, dims)
            for k in symmetric:
                n = self.grid[k]
                forward, backward = self.axis_kernels[k].kernels(n, u.dtype)  # (C, n) each
                # (C, 2n): lag l at l, lag -l at 2n - l
                lags = torch.cat([forward, backward.flip(-1)], dim=-1)
                transform = torch.fft.rfft if k == symmetric[-1] else torch.fft.fft
                response = transform(lags, n=2 * n)  # (C, F_k)
                shape = [1] * spectrum.dim()
                shape[k + 1], shape[-1] = response.shape[1], response.shape[0]
                spectrum = spectrum * response.mT.reshape(shape)  # (B, …, F_k, …, C)
            # (B, *grid, C): the linear convolution's outputs
            y = cropped_inverse(spectrum, dims, [self.grid[k] for k in symmetric])
        for k in self.causal_axes:
            # (C, n): heads = channels
            kernel = self.axis_kernels[k].kernels(self.grid[k], u.dtype)[0]
            # (B, *grid, C)
            y = causal_mode_product(y.unsqueeze(-1), kernel, axis=k + 1).squeeze(-1)
        return y

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        """``x``: (B, P + N, C) with P prefix tokens first, then the grid in row-major order;
        returns its shape.

        Exactly causal along ``causal_axes`` whatever ``is_causal`` says. The convolution runs in at
        least float32 with autocast off; the result comes back in ``x``'s dtype.
        """
        check_mixer_input(self, x, attn_mask, is_causal)
        return mix_grid_tokens(
            x,
            self.grid,
            self.num_prefix_tokens,
            lambda u: self.mix(u) + u * self.D.to(u.dtype),  # (B, *grid, C)
            then=lambda y: self.proj(self.act(y)),
        )  # (B, P + N, C)

    def fit_grid(self, source: GridMixer) -> None:
        """Each axis's ``dt_scale`` multiplied by ``old_length / new_length`` (left as it is where
        the length is unchanged)."""
        with torch.no_grad():
            for old, new, kernel in zip(source.grid, self.grid, self.axis_kernels):
                if old != new:
                    kernel.dt_scale.mul_(old / new)  # ()

    def repr_parts(self) -> tuple[str, ...]:
        return f"d_state={self.d_state}", f"causal_axes={self.causal_axes}"


def regrid_s4nd(module: S4NDMixer, grid: GridLike) -> S4NDMixer:
    """The same S4ND mixer on another grid of the same rank (module docstring, "Resolution change").

    Returns a new module with the same parameters; each axis's ``dt_scale`` is multiplied by
    ``old_length / new_length`` (exactly 1 where the length is unchanged, so the same grid gives
    bit-identical outputs).
    """
    return S4NDMixer.copy_onto(module, grid, caller="regrid_s4nd")


def build_s4nd(dim: int, grid: GridLike, *, num_heads: int, **kwargs) -> S4NDMixer:
    """The registry's builder (:mod:`gridmix.mixers.contract`): an :class:`S4NDMixer`.

    ``num_heads`` is accepted and unused (the kernels are per channel); ``causal_axes``,
    ``num_prefix_tokens``, ``d_state``, ``device``, ``dtype`` and ``proj_bias`` (the output
    projection's bias) pass on; timm's other keyword arguments (``qkv_bias``, ``attn_drop``,
    ``norm_layer`` …) are accepted and ignored.
    """
    return S4NDMixer(dim, grid, **taken(kwargs, S4NDMixer.keywords()))
