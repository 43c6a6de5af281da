"""``torch.compile(fullgraph=True)`` of the mixer and of a timm ViT built with it: values and
gradients equal eager.

Dynamo must capture each path in one graph (no graph break): the fused native kernel's custom op
(float32 CPU), the library-GEMM autograd node (what CUDA and ``set_native(False)`` run), causal
axes, prefix tokens, and the mixed-precision cast. Most cases compile with ``backend="aot_eager"``
(graph capture and AOT autograd without C++ code generation, seconds); one compiles with inductor,
the default backend.
"""

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from gridmix import ConcentrationMixer, mixer_layer, set_native

CASES = {
    "2d-native": ("6x5", {}),
    "3d": ("4x3x5", {}),
    "causal": ("6x5", {"causal_axes": (0,)}),
    "prefix": ("6x5", {"num_prefix_tokens": 2}),
}
F32 = dict(rtol=2e-5, atol=2e-5)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    set_native(None)


def _values_and_grads(module, x):
    out = module(x)
    grads = torch.autograd.grad(out.square().sum(), [x, *module.parameters()])
    return out, grads


def _assert_compiled_matches_eager(module, x, *, backend="aot_eager", **tolerance):
    x = x.requires_grad_()
    compiled = torch.compile(module, fullgraph=True, backend=backend)
    out, grads = _values_and_grads(compiled, x)
    eager_out, eager_grads = _values_and_grads(module, x)
    torch.testing.assert_close(out, eager_out, **(tolerance or F32))
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want, **(tolerance or F32))


def _mixer(name):
    grid, extra = CASES[name]
    torch.manual_seed(0)
    mixer = ConcentrationMixer(16, grid, num_heads=2, rank=3, **extra)
    return mixer, torch.randn(2, mixer.num_prefix_tokens + mixer.grid.numel, 16)


@pytest.mark.parametrize("name", CASES)
def test_the_layer_compiles_in_one_graph(name):
    _assert_compiled_matches_eager(*_mixer(name))


def test_the_library_gemm_path_compiles_in_one_graph():
    set_native(False)  # the path CUDA tensors take
    _assert_compiled_matches_eager(*_mixer("2d-native"))


def test_the_layer_compiles_under_autocast():
    mixer, x = _mixer("causal")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _assert_compiled_matches_eager(mixer, x, rtol=0.02, atol=0.02)


def test_inductor_compiles_the_native_kernel_path():
    _assert_compiled_matches_eager(*_mixer("2d-native"), backend="inductor")


def test_a_vit_built_with_the_mixer_compiles_in_one_graph():
    torch.manual_seed(0)
    model = VisionTransformer(
        img_size=8,
        patch_size=1,
        embed_dim=16,
        depth=2,
        num_heads=2,
        num_classes=3,
        attn_layer=mixer_layer("concentration", "8x8", rank=3),
        class_token=False,
        global_pool="avg",
    )
    _assert_compiled_matches_eager(model, torch.randn(2, 3, 8, 8), rtol=1e-4, atol=1e-5)
