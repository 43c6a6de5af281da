"""The Triton kernel for 2-d Tucker chains, run on the CPU by Triton's interpreter
(``TRITON_INTERPRET=1``).

It must compute the library chain's values and all gradients (input, both bases, the eigenvalues
through the scale) on padded and unpadded shapes. The interpreter is chosen when the kernel module
is imported, so this file sets it first; it skips (saying why) only where triton is not installed.
"""

import os

import pytest
import torch

triton = pytest.importorskip(
    "triton", reason="triton is not installed (it ships with CUDA builds of torch)"
)
os.environ.setdefault("TRITON_INTERPRET", "1")

from gridmix.mixers.concentration.ops.tucker import _scale, _Tucker, tucker  # noqa: E402
from gridmix.mixers.concentration.ops.tucker_triton import triton_chain, triton_fits  # noqa: E402
from gridmix.mixers.switches import set_triton  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ["TRITON_INTERPRET"] != "1" and not torch.cuda.is_available(),
    reason="TRITON_INTERPRET is off and there is no GPU to run the kernel",
)
DEVICE = "cpu" if os.environ["TRITON_INTERPRET"] == "1" else "cuda"


@pytest.mark.parametrize(
    ("shape", "axes", "ranks"),
    [
        ((2, 16, 16, 2, 3), (1, 2), (4, 5)),  # padded ranks
        ((2, 10, 7, 3, 2), (2, 1), (3, 4)),  # padded axes, the projection order not the axis order
    ],
)
def test_the_kernel_matches_the_library_chain_values_and_gradients(shape, axes, ranks):
    torch.manual_seed(0)
    x = torch.randn(*shape, device=DEVICE, requires_grad=True)
    bases = [
        torch.linalg.qr(torch.randn(shape[a], r))[0].to(DEVICE).requires_grad_()
        for a, r in zip(axes, ranks)
    ]
    lams = [torch.rand(shape[-2], r, device=DEVICE, requires_grad=True) for r in ranks]
    assert triton_fits(x, bases, axes)
    weight = torch.randn(shape, device=DEVICE)
    got = triton_chain(x, bases, _scale(lams, axes, x.dim()), axes)
    want = _Tucker.apply(x, tuple(axes), True, True, *bases, *lams)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    inputs = (x, *bases, *lams)
    got_grads = torch.autograd.grad((got * weight).sum(), inputs)
    for g, w in zip(got_grads, torch.autograd.grad((want * weight).sum(), inputs)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_the_switch_leaves_cpu_tensors_on_their_path():
    x = torch.randn(2, 8, 8, 2, 2)
    bases = [torch.linalg.qr(torch.randn(8, 3))[0] for _ in range(2)]
    lams = [torch.rand(2, 3) for _ in range(2)]
    try:
        set_triton(True)  # CUDA only: a CPU call keeps the native / library path, same values
        torch.testing.assert_close(
            tucker(x, bases, (1, 2), eigenvalues=lams),
            _Tucker.apply(x, (1, 2), True, True, *bases, *lams),
            rtol=2e-5,
            atol=2e-5,
        )
    finally:
        set_triton(None)
    with pytest.raises(TypeError, match="set_triton\\(enabled=1\\); expected True, False or None"):
        set_triton(1)
