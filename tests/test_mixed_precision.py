"""The mixer under mixed precision: CPU autocast in bf16 and fp16, and as a bf16 module, on every
path.

Every path (Tucker on 1-D, 2-D and 3-D grids, a causal axis, prefix tokens) must run forward and
backward under ``torch.autocast("cpu", dtype=…)``, agree with float32 to the precision of the narrow
dtype, and give float32 gradients to a float32 module. The certificate (``spectral_bound``) is
float32 whatever the parameters' dtype: a bf16 sigmoid rounds eigenvalues near 1 up to exactly 1.
"""

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from gridmix import ConcentrationMixer, mixer_layer

CASES = {
    "1d": ("64", {}),
    "2d": ("8x8", {}),
    "3d": ("4x4x8", {}),
    "causal": ("8x8", {"causal_axes": (0,)}),
    "prefix": ("8x8", {"num_prefix_tokens": 2}),
}
NARROW = {torch.bfloat16: dict(rtol=0.05, atol=0.05), torch.float16: dict(rtol=0.01, atol=0.01)}


def _mixer(name, **kwargs):
    grid, extra = CASES[name]
    torch.manual_seed(0)
    mixer = ConcentrationMixer(32, grid, num_heads=4, rank=3, **extra, **kwargs)
    x = torch.randn(2, mixer.num_prefix_tokens + mixer.grid.numel, 32)
    return mixer, x


@pytest.mark.parametrize("dtype", NARROW, ids=str)
@pytest.mark.parametrize("name", CASES)
def test_autocast_forward_and_backward_match_float32(name, dtype):
    mixer, x = _mixer(name)
    reference = mixer(x)
    with torch.autocast("cpu", dtype=dtype):
        out = mixer(x)
    # the output projection runs in the autocast dtype, as timm's attention
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), reference, **NARROW[dtype])
    out.float().square().mean().backward()
    grads = {n: p.grad for n, p in mixer.named_parameters()}
    assert all(
        g is not None and g.dtype == torch.float32 and torch.isfinite(g).all()
        for g in grads.values()
    ), grads
    mixer.zero_grad()
    reference.square().mean().backward()
    for n, p in mixer.named_parameters():
        torch.testing.assert_close(
            grads[n], p.grad, rtol=0.1, atol=0.02 if dtype == torch.bfloat16 else 0.005
        )


@pytest.mark.parametrize("name", CASES)
def test_a_bf16_module_matches_its_float32_copy(name):
    mixer, x = _mixer(name)
    narrow = mixer.to(torch.bfloat16)
    wide = ConcentrationMixer(32, narrow.grid, **narrow.config)
    # the same (rounded) weights
    wide.load_state_dict({k: v.float() for k, v in narrow.state_dict().items()})
    x = x.bfloat16()
    out = narrow(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), wide(x.float()), **NARROW[torch.bfloat16])
    out.float().sum().backward()
    assert all(
        p.grad.dtype == torch.bfloat16 and torch.isfinite(p.grad).all() for p in narrow.parameters()
    )


def test_the_certificate_is_float32_when_bf16_would_round_it_to_one():
    mixer = ConcentrationMixer(16, "8x8", num_heads=2, rank=4, causal_axes=(1,)).to(torch.bfloat16)
    with torch.no_grad():
        mixer.axis_factors[0].theta.fill_(7.0)  # sigmoid(7) = 0.99909: 1.0 in bf16
        mixer.axis_factors[1].gain_logit.fill_(7.0)
    assert torch.sigmoid(mixer.axis_factors[0].theta).max() == 1.0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bound = mixer.spectral_bound()
    assert bound.dtype == torch.float32
    assert (bound < 1).all(), bound
    torch.testing.assert_close(
        bound, torch.full((2,), torch.sigmoid(torch.tensor(7.0)).item() ** 2)
    )


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_a_vit_training_step_under_autocast(dtype):
    torch.manual_seed(0)
    model = VisionTransformer(
        img_size=16,
        patch_size=2,
        embed_dim=32,
        depth=2,
        num_heads=4,
        num_classes=3,
        attn_layer=mixer_layer("concentration", "8x8", rank=4),
        class_token=False,
        global_pool="avg",
    )
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 3, (4,))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    with torch.autocast("cpu", dtype=dtype):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    assert all(
        torch.isfinite(p).all() and not torch.equal(p, b)
        for p, b in zip(model.parameters(), before)
    )
