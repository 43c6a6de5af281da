"""The Mamba-2 (SSD) mixer against its float64 reference, the sequential recurrence token by token
(values and gradients, 1-d to 3-d grids, causal and not, several chunks), plus exact causality,
prefix tokens, the chunk size, resolution change and the refusals."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gridmix.mixers.mamba import MambaMixer, build_mamba, regrid_mamba, scan_directions

pytestmark = pytest.mark.usefixtures("one_thread")

CASES = [
    ((7,), ()),
    ((7,), (0,)),
    ((4, 6), ()),
    ((4, 6), (1,)),
    ((3, 5), (0, 1)),
    ((2, 3, 4), ()),
    ((2, 3, 4), (0,)),
]


def short_conv_reference(u: torch.Tensor, weight: torch.Tensor, bias, causal_axes) -> torch.Tensor:
    """PyTorch's depthwise ``conv1d``/``conv2d``/``conv3d`` of ``u`` (B, *grid, C), padded by two
    before a causal axis and by one on each side of a symmetric one."""
    d, C = u.dim() - 2, u.shape[-1]
    pad = []
    for k in reversed(range(d)):
        pad += [2, 0] if k in causal_axes else [1, 1]
    conv = (F.conv1d, F.conv2d, F.conv3d)[d - 1]
    out = conv(F.pad(u.movedim(-1, 1), pad), weight.unsqueeze(1), bias, groups=C)
    return out.movedim(1, -1)


def mamba_reference(m: MambaMixer, x: torch.Tensor) -> torch.Tensor:
    """The mixer's output from its parameters, each scan the recurrence ``h_t = exp(Δ_t A) h_{t-1}
    + Δ_t x_t B_tᵀ, y_t = h_t C_t + D x_t`` one token at a time (float64, differentiable)."""
    grid, P = m.grid.shape, m.num_prefix_tokens
    Bsz, _, _ = x.shape
    E, S, h, K = m.inner, m.d_state, m.num_heads, len(m.directions)
    u = x[:, P:].reshape(Bsz, *grid, -1)
    z, xBC, dt = (u @ m.in_proj.weight.T).split([E, E + 2 * K * S, K * h], dim=-1)
    xBC = F.silu(short_conv_reference(xBC, m.conv.weight, m.conv.bias, m.causal_axes))
    xs, BC = xBC.split([E, 2 * K * S], dim=-1)
    xs = xs.unflatten(-1, (h, E // h))
    total = 0
    for k, (axis, backward) in enumerate(m.directions):
        A = -m.A_log[k].exp()
        delta = F.softplus(dt[..., k * h : (k + 1) * h] + m.dt_bias[k])
        Bk = BC[..., 2 * k * S : (2 * k + 1) * S]
        Ck = BC[..., (2 * k + 1) * S : (2 * k + 2) * S]
        n = grid[axis]
        state = torch.zeros(*xs.select(axis + 1, 0).shape, S, dtype=x.dtype)  # (B, …, h, p, S)
        outputs = [None] * n
        for t in reversed(range(n)) if backward else range(n):
            d_t, x_t = delta.select(axis + 1, t), xs.select(axis + 1, t)
            B_t, C_t = Bk.select(axis + 1, t), Ck.select(axis + 1, t)
            state = (d_t * A).exp()[..., None, None] * state + (d_t[..., None] * x_t)[
                ..., None
            ] * B_t[..., None, None, :]
            outputs[t] = (state * C_t[..., None, None, :]).sum(-1) + m.D[k][:, None] * x_t
        total = total + torch.stack(outputs, dim=axis + 1)
    y = (total / K).flatten(-2) * F.silu(z)
    y = y * torch.rsqrt(y.square().mean(-1, keepdim=True) + m.norm.eps) * m.norm.weight
    y = y @ m.out_proj.weight.T + m.out_proj.bias
    return torch.cat([x[:, :P], y.reshape(Bsz, -1, m.dim)], dim=1)


def trained(m: MambaMixer, seed: int = 1) -> MambaMixer:
    """Parameters away from the initialisation: larger steps (decays well below 1), random D and
    norm."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
        m.dt_bias.add_(2.0)
    return m


def assert_matches_reference(m: torch.nn.Module, x: torch.Tensor, reference) -> None:
    """``m(x)`` equals ``reference(m, x)`` in float64, and so do the gradients of the input and of
    every parameter under one random output weighting."""
    y, expected = m(x), reference(m, x)
    torch.testing.assert_close(y, expected, rtol=1e-10, atol=1e-12)
    weight = torch.randn(y.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    params = [x, *m.parameters()]
    got = torch.autograd.grad((y * weight).sum(), params)
    want = torch.autograd.grad((expected * weight).sum(), params)
    for name, a, b in zip(["x", *(n for n, _ in m.named_parameters())], got, want):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=name)


def tokens(grid, prefix=0, dim=8, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, prefix + math.prod(grid), dim, generator=g, dtype=torch.float64)


@pytest.mark.parametrize(("grid", "causal"), CASES)
def test_the_chunked_scan_is_the_token_by_token_recurrence_values_and_gradients(grid, causal):
    torch.manual_seed(0)
    m = trained(
        MambaMixer(
            8,
            grid,
            num_heads=2,
            causal_axes=causal,
            num_prefix_tokens=1,
            d_state=4,
            chunk_size=2,  # several chunks, and a padded last one on odd lines
            dtype=torch.float64,
        )
    )
    x = tokens(grid, prefix=1).requires_grad_(True)
    assert_matches_reference(m, x, mamba_reference)


@pytest.mark.parametrize("chunk_size", [1, 3, 5, 64])
def test_the_chunk_size_does_not_change_the_result(chunk_size):
    torch.manual_seed(0)
    reference = trained(MambaMixer(8, "5x7", num_heads=2, chunk_size=64, dtype=torch.float64))
    other = MambaMixer(8, "5x7", num_heads=2, chunk_size=chunk_size, dtype=torch.float64)
    other.load_state_dict(reference.state_dict())
    x = tokens((5, 7))
    torch.testing.assert_close(other(x), reference(x), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize(("grid", "causal"), [((9,), (0,)), ((4, 6), (0,)), ((3, 4, 5), (1, 2))])
def test_a_causal_axis_gives_a_later_token_exactly_zero_gradient(grid, causal):
    torch.manual_seed(0)
    m = trained(MambaMixer(8, grid, num_heads=2, causal_axes=causal, chunk_size=2))
    x = tokens(grid).float().requires_grad_(True)
    y = m(x).reshape(2, *grid, 8)
    for axis in causal:
        p = grid[axis] // 2
        y.narrow(axis + 1, 0, p + 1).sum().backward(retain_graph=True)
        later = x.grad.reshape(2, *grid, 8).narrow(axis + 1, p + 1, grid[axis] - p - 1)
        assert later.abs().max() == 0 and x.grad.abs().max() > 0
        x.grad = None


def test_a_causal_axis_is_scanned_forward_only_and_the_others_both_ways():
    assert scan_directions(MambaMixer(8, "3x4x5", num_heads=2).grid, (1,)) == (
        (0, False),
        (0, True),
        (1, False),
        (2, False),
        (2, True),
    )
    m = MambaMixer(8, "3x4", num_heads=2, causal_axes=(-1,))
    assert m.directions == ((0, False), (0, True), (1, False)) and m.A_log.shape == (3, 2)


def test_prefix_tokens_pass_unchanged_and_the_grid_does_not_see_them():
    m = MambaMixer(8, "3x4", num_heads=2, num_prefix_tokens=2, dtype=torch.float64)
    x = tokens((3, 4), prefix=2)
    y = m(x)
    changed = x.clone()
    changed[:, :2] += 1.0
    assert torch.equal(y[:, :2], x[:, :2]) and torch.equal(m(changed)[:, 2:], y[:, 2:])


def test_the_same_mixer_moves_to_another_grid_with_the_same_parameters():
    torch.manual_seed(0)
    m = trained(MambaMixer(8, "4x6", num_heads=2, causal_axes=(0,), dtype=torch.float64))
    assert torch.equal(regrid_mamba(m, "4x6")(tokens((4, 6))), m(tokens((4, 6))))
    moved = m.regrid("5x9")
    fresh = MambaMixer(8, "5x9", num_heads=2, causal_axes=(0,), dtype=torch.float64)
    fresh.load_state_dict(m.state_dict())
    assert torch.equal(moved(tokens((5, 9))), fresh(tokens((5, 9))))
    with pytest.raises(ValueError, match="cannot regrid the 2-d Mamba mixer on 4x6 to the 1-d"):
        regrid_mamba(m, "12")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(num_heads=3), "num_heads=3; expected a divisor of expand \\* dim = 16"),
        (dict(num_heads=2, chunk_size=0), "chunk_size=0; expected a positive integer"),
        (dict(num_heads=2, causal_axes=(2,)), "causal axis 2 for the 2-d grid 3x4"),
        (dict(num_heads=2, num_prefix_tokens=-1), "num_prefix_tokens=-1; expected an integer"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_mamba(8, "3x4", **kwargs)


def test_float32_matches_float64():
    torch.manual_seed(0)
    m64 = trained(MambaMixer(8, "6x5", num_heads=2, causal_axes=(1,), dtype=torch.float64))
    m32 = MambaMixer(8, "6x5", num_heads=2, causal_axes=(1,))
    m32.load_state_dict({k: v.float() for k, v in m64.state_dict().items()})
    x = tokens((6, 5))
    torch.testing.assert_close(m32(x.float()).double(), m64(x), rtol=1e-4, atol=1e-5)
