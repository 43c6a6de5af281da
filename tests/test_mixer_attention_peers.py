"""The attention-family peers of the token mixers (neighbourhood, axial, divided and linear
attention), pinned in float64 against references written here independently: explicit loops over
windows and lines, einsum softmax, the masked quadratic form of linear attention; and their
causality, exact (a later input's gradient is 0.0)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from timm.models.vision_transformer import Attention, Block
from torch import nn

from gridmix.mixers.axial import build_axial_attention, build_divided_attention
from gridmix.mixers.contract import MixerSpec
from gridmix.mixers.linear_attention import build_linear_attention
from gridmix.mixers.neighbourhood import build_neighbourhood_attention, neighbourhood_mask

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
DIM, HEADS = 8, 2
GRIDS = [(9,), (5, 6), (3, 4, 5)]
BUILDERS = {
    "neighbourhood": build_neighbourhood_attention,
    "axial": build_axial_attention,
    "divided": build_divided_attention,
    "linear": build_linear_attention,
}


def build(name: str, grid, **kwargs) -> nn.Module:
    torch.manual_seed(0)
    kwargs.setdefault("dtype", F64)
    return BUILDERS[name](DIM, grid, num_heads=HEADS, **kwargs)


def tokens(grid, prefix: int = 0, batch: int = 2, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, prefix + math.prod(grid), DIM, generator=g, dtype=F64)


def positions(grid) -> list[tuple[int, ...]]:
    """The grid positions in row-major order (the last axis fastest), by enumeration, not by
    reshape."""
    return list(itertools.product(*(range(n) for n in grid)))


def heads(linear: nn.Linear, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v (B, h, T, c) of timm's fused qkv layout: output features ordered (q|k|v, head,
    channel)."""
    y = x @ linear.weight.T + (linear.bias if linear.bias is not None else 0.0)
    B, T, _ = x.shape
    q, k, v = y.split(DIM, dim=-1)
    return tuple(t.reshape(B, T, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v))


def softmax_attention(layer: nn.Module, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Dense multi-head softmax attention of ``x`` (B, T, C) with ``layer``'s qkv and proj under
    ``allowed`` (T, T)."""
    q, k, v = heads(layer.qkv, x)
    scores = torch.einsum("bhic,bhjc->bhij", q, k) / math.sqrt(DIM // HEADS)
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    out = torch.einsum("bhij,bhjc->bihc", weights, v).reshape(x.shape)
    return layer.proj(out)


def gradient_by_token(module: nn.Module, x: torch.Tensor, i: int) -> torch.Tensor:
    """(T,): Σ |∂(w · out_i) / ∂x_j| over channels and batch, for every input token j."""
    x = x.clone().requires_grad_(True)
    w = torch.linspace(0.5, 1.5, DIM, dtype=F64)
    (module(x)[:, i] * w).sum().backward()
    return x.grad.abs().sum(dim=(0, 2))


def assert_support(module: nn.Module, x: torch.Tensor, allowed: torch.Tensor) -> None:
    """Output token i's gradient is exactly 0.0 on every input j with ``allowed[i, j]`` False,
    nonzero elsewhere."""
    for i in range(x.shape[1]):
        grad = gradient_by_token(module, x, i)
        assert torch.all(grad[~allowed[i]] == 0.0), (
            f"token {i} sees tokens {(~allowed[i] & (grad != 0)).nonzero()}"
        )
        assert torch.all(grad[allowed[i]] > 0.0), (
            f"token {i} misses tokens {(allowed[i] & (grad == 0)).nonzero()}"
        )


def causal_support(grid, causal_axes) -> torch.Tensor:
    """(N, N): key position ``kp`` is not later than query position ``qp`` on any causal axis."""
    pos = positions(grid)
    return torch.tensor([[all(kp[a] <= qp[a] for a in causal_axes) for kp in pos] for qp in pos])


# ------------------------------------------------------------------------------------------ every
# mixer


@pytest.mark.parametrize(
    "name, grid",
    [(name, grid) for name in BUILDERS for grid in GRIDS if name != "divided" or len(grid) >= 2],
)  # divided: rank >= 2
def test_output_shape(name, grid):
    x = tokens(grid)
    for causal_axes in ((), (0,)):
        assert build(name, grid, causal_axes=causal_axes)(x).shape == x.shape


@pytest.mark.parametrize("name", BUILDERS)
def test_gradients_reach_inputs_and_parameters(name):
    module = build(name, (3, 4))
    x = tokens((3, 4)).requires_grad_(True)
    (module(x) * torch.linspace(-1, 1, DIM, dtype=F64)).sum().backward()
    assert x.grad.abs().sum(dim=(0, 2)).gt(0).all()
    for pname, p in module.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


@pytest.mark.parametrize("name", BUILDERS)
def test_device_dtype_and_biases_are_honoured(name):
    module = build(name, (3, 4), device="meta", dtype=F64, qkv_bias=False, proj_bias=False)
    assert {p.device.type for p in module.parameters()} == {"meta"}
    assert {b.device.type for b in module.buffers()} <= {"meta"}
    assert {p.dtype for p in module.parameters()} == {F64}
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    assert linears and all(m.bias is None for m in linears)
    module = build(name, (3, 4), dtype=torch.float32, qkv_bias=True)
    qkv = [m for n, m in module.named_modules() if n.endswith("qkv")]
    assert qkv and all(m.bias is not None and m.bias.dtype == torch.float32 for m in qkv)
    assert module(tokens((3, 4)).float()).dtype == torch.float32


@pytest.mark.parametrize("name", BUILDERS)
def test_in_a_timm_block_with_timm_arguments(name):
    """timm's Block builds the mixer through MixerSpec.layer with all its keyword arguments (qk_norm
    included)."""
    spec = MixerSpec(f"{name}-peer", BUILDERS[name], causal="any", prefix_tokens=True)
    for qk_norm in (False, True):
        block = Block(
            DIM,
            num_heads=HEADS,
            qkv_bias=True,
            qk_norm=qk_norm,
            attn_layer=spec.layer((3, 4)),
            depth=2,
            dtype=F64,
        )
        x = tokens((3, 4))
        assert block(x).shape == x.shape
        assert any(isinstance(m, nn.LayerNorm) for m in block.attn.modules()) == qk_norm


@pytest.mark.parametrize("name", BUILDERS)
def test_refusals_common_to_all(name):
    with pytest.raises(ValueError, match="dim=10"):
        BUILDERS[name](10, (3, 4), num_heads=4)
    with pytest.raises(ValueError, match="causal"):
        build(name, (3, 4), causal_axes=(2,))
    module = build(name, (3, 4))
    with pytest.raises(ValueError, match=r"\(2, 11, 8\)"):
        module(tokens((3, 4))[:, 1:])
    with pytest.raises(ValueError, match="attn_mask"):
        module(tokens((3, 4)), attn_mask=torch.ones(12, 12, dtype=torch.bool))
    with pytest.raises(ValueError, match="is_causal=True"):
        module(tokens((3, 4)), is_causal=True)


@pytest.mark.parametrize("name", ["neighbourhood", "axial"])
def test_an_axis_the_grid_lacks_is_refused_in_s4nds_words(name):
    """One rule reads every mixer's causal axes: the same one-line error, naming the axis range
    inclusively."""
    with pytest.raises(
        ValueError, match=r"causal axis 2 for the 2-d grid 3x4; expected an integer in \[-2, 1\]$"
    ):
        build(name, (3, 4), causal_axes=(2,))


@pytest.mark.parametrize("name", ["axial", "divided", "linear"])
def test_refusals_of_prefix_tokens(name):
    # linear attention refuses prefix tokens in its causal form only
    causal_axes = (0,) if name == "linear" else ()
    with pytest.raises(ValueError, match="num_prefix_tokens=1"):
        build(name, (3, 4), causal_axes=causal_axes, num_prefix_tokens=1)


@pytest.mark.parametrize("name", ["divided", "linear"])
def test_refusals_of_causal_axes_other_than_the_first(name):
    for causal_axes in ((1,), (0, 1), (-1,)):
        with pytest.raises(ValueError, match=r"expected \(\) or \(0,\)"):
            build(name, (3, 4), causal_axes=causal_axes)
    build(name, (3, 4), causal_axes=(-2,))  # the first axis by a negative index


def test_refusals_of_rank_and_kernel():
    with pytest.raises(ValueError, match="rank >= 2"):
        build("divided", (9,))
    for kernel_size in (4, 0, (3,), (3, 3, 3), True):
        with pytest.raises(ValueError, match="kernel_size="):
            build("neighbourhood", (3, 4), kernel_size=kernel_size)
    with pytest.raises(ValueError, match="eps=0"):
        build("linear", (3, 4), eps=0)


# ------------------------------------------------------------------------------------------
# neighbourhood


def natten_window(i: int, n: int, k: int, causal: bool) -> range:
    """NATTEN's window of position i on an axis of length n: k positions, shifted inward at the
    borders."""
    k = min(k, n)
    if causal:
        return range(max(i - k + 1, 0), i + 1)
    start = min(max(i - k // 2, 0), n - k)
    return range(start, start + k)


def reference_mask(grid, kernel, causal_axes, prefix: int = 0) -> torch.Tensor:
    """(P + N, P + N) by a loop over token pairs; prefix tokens as the module documents."""
    kernel = (kernel,) * len(grid) if isinstance(kernel, int) else kernel
    pos = positions(grid)
    P, N = prefix, len(pos)
    mask = torch.zeros(P + N, P + N, dtype=torch.bool)
    for a, qp in enumerate(pos):
        for b, kp in enumerate(pos):
            mask[P + a, P + b] = all(
                kp[ax] in natten_window(qp[ax], n, kernel[ax], ax in causal_axes)
                for ax, n in enumerate(grid)
            )
    mask[:, :P] = True
    mask[:P, P:] = not causal_axes
    return mask


NEIGHBOURHOOD_CASES = [
    ((9,), 3, ()),
    ((9,), 7, ()),
    ((9,), 3, (0,)),
    ((4,), 7, ()),
    ((5, 6), 3, ()),
    ((5, 6), (3, 5), (0,)),
    ((5, 6), 5, (1,)),
    ((3, 4, 5), 3, ()),
    ((3, 4, 5), 3, (0, 2)),
]


@pytest.mark.parametrize("grid, kernel, causal_axes", NEIGHBOURHOOD_CASES)
def test_neighbourhood_mask_is_natten_window(grid, kernel, causal_axes):
    mask = neighbourhood_mask(grid, kernel, causal_axes)
    assert torch.equal(mask, reference_mask(grid, kernel, causal_axes))
    # every token sees exactly k positions per axis: shifted, not truncated, at the borders
    if not causal_axes:
        kernel = (kernel,) * len(grid) if isinstance(kernel, int) else kernel
        assert torch.all(mask.sum(dim=1) == math.prod(min(k, n) for k, n in zip(kernel, grid)))


@pytest.mark.parametrize("prefix", [0, 2])
@pytest.mark.parametrize("grid, kernel, causal_axes", NEIGHBOURHOOD_CASES)
def test_neighbourhood_matches_dense_reference(grid, kernel, causal_axes, prefix):
    module = build(
        "neighbourhood", grid, kernel_size=kernel, causal_axes=causal_axes, num_prefix_tokens=prefix
    )
    x = tokens(grid, prefix)
    expected = softmax_attention(module, x, reference_mask(grid, kernel, causal_axes, prefix))
    torch.testing.assert_close(module(x), expected, rtol=1e-12, atol=1e-12)


def test_neighbourhood_with_the_whole_grid_in_its_window_is_timm_attention():
    module = build(
        "neighbourhood", (3, 5), kernel_size=5, num_prefix_tokens=1, qk_norm=True, scale_norm=True
    )
    timm_attention = Attention(
        DIM,
        num_heads=HEADS,
        qkv_bias=True,
        qk_norm=True,
        scale_norm=True,
        norm_layer=nn.LayerNorm,
        dtype=F64,
    )
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    # strict: the same parameters, the mask is no state
    timm_attention.load_state_dict(module.state_dict())
    x = tokens((3, 5), 1)
    torch.testing.assert_close(module(x), timm_attention(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "grid, kernel, causal_axes",
    [
        ((9,), 3, (0,)),
        ((5, 6), 7, (0,)),
        ((5, 6), 3, (0,)),
        ((5, 6), 3, ()),
        ((3, 4, 5), 3, (0, 2)),
    ],
)
def test_neighbourhood_gradient_is_exactly_its_window(grid, kernel, causal_axes):
    """Each output sees exactly its window (and, causal, nothing later: gradient 0.0); prefix tokens
    included."""
    module = build(
        "neighbourhood", grid, kernel_size=kernel, causal_axes=causal_axes, num_prefix_tokens=1
    )
    allowed = reference_mask(grid, kernel, causal_axes, prefix=1)
    assert_support(module, tokens(grid, 1, batch=1), allowed)
    if causal_axes:
        assert not (allowed[1:, 1:] & ~causal_support(grid, causal_axes)).any()


def test_neighbourhood_causal_whatever_is_causal_says():
    module = build("neighbourhood", (5, 6), kernel_size=7, causal_axes=(0,))
    x = tokens((5, 6), batch=1)
    torch.testing.assert_close(
        module(x, is_causal=True), module(x, is_causal=False), rtol=0, atol=0
    )
    later = causal_support((5, 6), (0,))
    for i in (0, 7, 13):
        assert torch.all(
            gradient_by_token(lambda t: module(t, is_causal=False), x, i)[~later[i]] == 0.0
        )


# ------------------------------------------------------------------------------------------ axial
# and divided


def line_reference(layer: nn.Module, lines: torch.Tensor, causal: bool) -> torch.Tensor:
    """timm-style attention within each line (M, L, C), by einsum softmax."""
    L = lines.shape[1]
    allowed = (
        torch.ones(L, L, dtype=torch.bool).tril() if causal else torch.ones(L, L, dtype=torch.bool)
    )
    return softmax_attention(layer, lines, allowed)


def axial_reference(module: nn.Module, x: torch.Tensor, grid, causal_axes) -> torch.Tensor:
    """Attention along axis 0, then 1, …: each line gathered by index from the enumerated
    positions."""
    index = {p: t for t, p in enumerate(positions(grid))}
    y = x
    for axis, n in enumerate(grid):
        out = torch.empty_like(y)
        for rest in itertools.product(*(range(m) for a, m in enumerate(grid) if a != axis)):
            line = [index[rest[:axis] + (i,) + rest[axis:]] for i in range(n)]
            out[:, line] = line_reference(module.axes[axis], y[:, line], axis in causal_axes)
        y = out
    return y


def divided_reference(module: nn.Module, x: torch.Tensor, grid, causal: bool) -> torch.Tensor:
    """Attention along time at each location, then over each frame."""
    index = {p: t for t, p in enumerate(positions(grid))}
    space = list(itertools.product(*(range(m) for m in grid[1:])))
    y = torch.empty_like(x)
    for s in space:
        line = [index[(t, *s)] for t in range(grid[0])]
        y[:, line] = line_reference(module.time, x[:, line], causal)
    out = torch.empty_like(x)
    for t in range(grid[0]):
        frame = [index[(t, *s)] for s in space]
        out[:, frame] = line_reference(module.space, y[:, frame], False)
    return out


@pytest.mark.parametrize(
    "grid, causal_axes",
    [
        ((9,), ()),
        ((9,), (0,)),
        ((5, 6), ()),
        ((5, 6), (0,)),
        ((5, 6), (1,)),
        ((3, 4, 5), ()),
        ((3, 4, 5), (0, 2)),
    ],
)
def test_axial_matches_reference(grid, causal_axes):
    module = build("axial", grid, causal_axes=causal_axes)
    x = tokens(grid)
    with torch.no_grad():
        expected = axial_reference(module, x, grid, causal_axes)
    torch.testing.assert_close(module(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "grid, causal", [((5, 6), False), ((5, 6), True), ((3, 4, 5), False), ((3, 4, 5), True)]
)
def test_divided_matches_reference(grid, causal):
    module = build("divided", grid, causal_axes=(0,) if causal else ())
    x = tokens(grid)
    with torch.no_grad():
        expected = divided_reference(module, x, grid, causal)
    torch.testing.assert_close(module(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "name, grid, causal_axes",
    [
        ("axial", (9,), (0,)),
        ("axial", (5, 6), (0,)),
        ("axial", (5, 6), (1,)),
        ("axial", (5, 6), (0, 1)),
        ("axial", (3, 4, 5), (0, 2)),
        ("divided", (5, 6), (0,)),
        ("divided", (3, 4, 5), (0,)),
        ("axial", (5, 6), ()),
        ("divided", (5, 6), ()),
    ],
)
def test_axial_and_divided_causality_is_exact(name, grid, causal_axes):
    """Every output sees every input not later on a causal axis, and later ones with gradient
    exactly 0.0."""
    module = build(name, grid, causal_axes=causal_axes)
    assert_support(module, tokens(grid, batch=1), causal_support(grid, causal_axes))


# ------------------------------------------------------------------------------------------ linear
# attention


def linear_reference(module: nn.Module, x: torch.Tensor, causal: bool) -> torch.Tensor:
    """The masked quadratic form: A = φ(q) φ(k)ᵀ (lower-triangular when causal), out = A v / (A 1 +
    eps)."""
    q, k, v = heads(module.qkv, x)
    phi_q, phi_k = (torch.where(t > 0, t + 1, t.exp()) for t in (q, k))  # elu + 1, written out
    A = torch.einsum("bhic,bhjc->bhij", phi_q, phi_k)
    if causal:
        A = A * torch.ones(A.shape[-2:], dtype=F64).tril()
    out = (A @ v) / (A.sum(dim=-1, keepdim=True) + module.eps)
    return module.proj(out.transpose(1, 2).reshape(x.shape))


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 64])
@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("causal, prefix", [(False, 0), (False, 2), (True, 0)])
def test_linear_matches_quadratic_form(grid, causal, prefix, chunk_size):
    module = build(
        "linear",
        grid,
        causal_axes=(0,) if causal else (),
        num_prefix_tokens=prefix,
        chunk_size=chunk_size,
        eps=1e-3,
    )
    x = tokens(grid, prefix)
    with torch.no_grad():
        expected = linear_reference(module, x, causal)
    torch.testing.assert_close(module(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "grid, chunk_size", [((9,), 4), ((5, 6), 7), ((5, 6), 64), ((3, 4, 5), 16)]
)
def test_linear_causality_is_exact(grid, chunk_size):
    """Causal along the first axis by row-major prefix sums: token i sees exactly the tokens j <=
    i."""
    module = build("linear", grid, causal_axes=(0,), chunk_size=chunk_size)
    N = math.prod(grid)
    allowed = torch.ones(N, N, dtype=torch.bool).tril()
    assert not (allowed & ~causal_support(grid, (0,))).any()
    assert_support(module, tokens(grid, batch=1), allowed)


def test_linear_non_causal_sees_everything_prefix_included():
    module = build("linear", (3, 4), num_prefix_tokens=2)
    assert_support(module, tokens((3, 4), 2, batch=1), torch.ones(14, 14, dtype=torch.bool))
