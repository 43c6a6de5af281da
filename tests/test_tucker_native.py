"""The fused native Tucker kernel against the library-GEMM path and float64, its fallback and its
integration.

``gridmix.mixers.concentration.ops.tucker_native`` compiles ``tucker_native.c`` on first use; every
float32 CPU mixer call without dense axes runs it. These tests pin that it computes the same
function and gradients as ``gridmix.mixers.concentration.ops.tucker._Tucker`` (itself pinned against
einsum in float64 by ``test_mixer_fastpath.py``) over the kernel's code paths (vector blocks and
scalar tails, packed and strided strips, the long-row basis gradient, permuted step orders, 1–3
axes) in every build the host can run (``kernel_build``: each x86 ISA level, the scalar form, no
OpenMP), that results do not depend on the thread count, and that without a compiler gridmix warns
and still computes.
"""

import warnings

import pytest
import torch

from gridmix import ConcentrationMixer
from gridmix.analysis.measure import _OpLog, count_flops, dry_run
from gridmix.mixers.concentration.ops import tucker as tucker_module
from gridmix.mixers.concentration.ops.native_build import (
    assume_constant_result,
    forget_library,
    native_available,
    native_library,
)
from gridmix.mixers.concentration.ops.tucker import _Tucker, tucker
from gridmix.mixers.concentration.ops.tucker_native import (
    chain_flops,
    innermost_first_among_ties,
    native_applies,
    tucker_chain,
    tucker_chain_backward,
)
from gridmix.mixers.switches import set_native

F32 = dict(rtol=2e-5, atol=2e-5)


def assert_close_to_scale(got: torch.Tensor, want: torch.Tensor, tol: float = 2e-6) -> None:
    """``|got − want| ≤ tol · max |want|``: float32 sums of thousands of products err to the
    tensor's scale, in an order that depends on the build's vector width, so an element near zero
    cannot be held to its own size."""
    error, scale = (got.double() - want.double()).abs().max().item(), want.abs().max().item()
    assert error <= tol * scale, f"max error {error:.3g} > {tol} × scale {scale:.3g}"


@pytest.fixture
def fresh_library(monkeypatch):
    """Forget the loaded kernel before and after the test, so environment changes take effect and do
    not leak."""
    forget_library()
    yield monkeypatch
    monkeypatch.undo()
    forget_library()


def _problem(shape, axes, ranks, *, seed=0):
    """x (B, *grid, h, c), orthonormal bases (n, r) per axis in ``axes`` order, eigenvalues (h, r)
    in (0, 1)."""
    torch.manual_seed(seed)
    x = torch.randn(*shape, requires_grad=True)
    bases = [
        torch.linalg.qr(torch.randn(shape[a], r))[0].requires_grad_() for a, r in zip(axes, ranks)
    ]
    lams = [torch.rand(shape[-2], r, requires_grad=True) for r in ranks]
    return x, bases, lams


def _value_and_grads(fn, x, bases, lams, weight):
    out = fn(x, bases, lams)
    return (out, *torch.autograd.grad((out * weight).sum(), (x, *bases, *lams)))


def _library(x, bases, lams, axes):
    return _Tucker.apply(x, tuple(axes), True, True, *bases, *lams)


CASES = [
    (
        (3, 64, 64, 4, 16),
        (1, 2),
        (16, 12),
    ),  # packed expansion strips, long-row gradients fused with the projection
    (
        (3, 64, 64, 4, 16),
        (1, 2),
        (16, 16),
    ),  # tied: run (2, 1), short-row gradients with P = 64, fused
    (
        (2, 8, 40, 2, 8),
        (1, 2),
        (4, 4),
    ),  # gradient rows of 640 floats: column chunks of 256, 256 and 128
    (
        (2, 6, 8, 4, 16),
        (2, 1),
        (4, 4),
    ),  # short-row gradients over P = 6 slices: a group of 4 (SLICES) and 2
    (
        (2, 16, 8, 4, 16),
        (1, 2),
        (6, 4),
    ),  # with 8 lanes, column pairs fused with a projection to 6 = 4 + 2 rows
    ((2, 10, 7, 3, 5), (1, 2), (4, 3)),  # scalar tails everywhere (S0 = 15)
    ((2, 10, 7, 3, 5), (2, 1), (3, 4)),  # the projection order differs from the axis order
    ((2, 6, 5, 7, 2, 3), (3, 1, 2), (4, 2, 3)),  # three axes in a permuted order
    (
        (2, 4, 8, 32, 2, 4),
        (1, 2, 3),
        (4, 4, 8),
    ),  # a long-row gradient with P > 1 (axis 2: P = 4, S = 256)
    ((1, 33, 17, 1, 19), (1, 2), (33, 5)),  # a full-rank axis, one head, odd channels
    ((2, 48, 2, 3), (1,), (5,)),  # one axis
    (
        (2, 45, 2, 3),
        (1,),
        (18,),
    ),  # one axis: the short-row basis gradient with a row tail and two column blocks
    (
        (2, 1100, 2, 8),
        (1,),
        (20,),
    ),  # a long axis beyond L1: the one-sweep projection (a 16-row block and a tail)
]


@pytest.mark.parametrize("shape,axes,ranks", CASES)
def test_native_chain_matches_the_library_path_and_float64(kernel_build, shape, axes, ranks):
    x, bases, lams = _problem(shape, axes, ranks)
    assert native_applies(x, bases, axes)
    weight = torch.randn(shape)
    native = _value_and_grads(
        lambda x, b, lam: tucker(x, b, axes, eigenvalues=lam), x, bases, lams, weight
    )
    library = _value_and_grads(lambda x, b, lam: _library(x, b, lam, axes), x, bases, lams, weight)

    def f64(t):
        return t.detach().double().requires_grad_()

    exact = _value_and_grads(
        lambda x, b, lam: _library(x, b, lam, axes),
        f64(x),
        [f64(u) for u in bases],
        [f64(lam) for lam in lams],
        weight.double(),
    )
    for got, lib, want in zip(native, library, exact):  # output, ∂x, ∂U_k, ∂λ_k
        assert_close_to_scale(got, lib)
        assert_close_to_scale(got, want)


def test_the_kernel_takes_long_tied_axes_innermost_first(monkeypatch):
    assert innermost_first_among_ties([1, 2], [64, 64], [16, 16]) == [1, 0]
    assert innermost_first_among_ties([1, 2], [32, 32], [16, 16]) == [
        0,
        1,
    ]  # shorter than INNER_FIRST_LENGTH
    assert innermost_first_among_ties([1, 2], [64, 64], [16, 12]) == [0, 1]  # ranks differ: no tie
    assert innermost_first_among_ties([2, 3, 1], [64, 64, 8], [16, 16, 8]) == [
        1,
        0,
        2,
    ]  # a run, then the rest
    assert innermost_first_among_ties([1, 2], [32, 32], [16, 16], min_length=0) == [1, 0]
    calls = []
    monkeypatch.setattr(
        tucker_module,
        "tucker_chain",
        lambda x, bases, scale, axes: calls.append((axes, bases)) or [x],
    )
    x, bases, lams = _problem((2, 64, 64, 2, 8), (1, 2), (16, 16))
    tucker(x, bases, (1, 2), eigenvalues=lams)
    axes, passed = calls[0]
    assert axes == [2, 1] and passed[0] is bases[1] and passed[1] is bases[0]


def test_results_do_not_depend_on_the_thread_count(kernel_build):
    shape, axes, ranks = (8, 32, 32, 2, 16), (1, 2), (8, 8)
    x, bases, lams = _problem(shape, axes, ranks)
    weight = torch.randn(shape)
    previous = torch.get_num_threads()
    runs = []
    try:
        for threads in (1, 2, 1):
            torch.set_num_threads(threads)
            runs.append(
                _value_and_grads(
                    lambda x, b, lam: tucker(x, b, axes, eigenvalues=lam), x, bases, lams, weight
                )
            )
    finally:
        torch.set_num_threads(previous)
    for first, other in zip(runs[0], runs[1]):
        # bit for bit: each batch element is one thread's, partials summed in order
        assert torch.equal(first, other)
    for first, again in zip(runs[0], runs[2]):
        assert torch.equal(first, again)


def test_a_float32_mixer_runs_the_kernel_and_agrees_with_float64():
    mixer = ConcentrationMixer(16, "12x20", num_heads=2, rank=(5, 7))
    with torch.no_grad():
        for p in mixer.axis_factors.parameters():
            p.add_(0.1 * torch.randn_like(p))
    v = torch.randn(3, 12, 20, 16, requires_grad=True)
    with _OpLog() as log:
        out = mixer.mix(v)
    assert log.calls[torch.ops.gridmix.tucker_chain] == 1
    exact = mixer.double().mix(v.detach().double())
    torch.testing.assert_close(out.double(), exact, **F32)
    out.sum().backward()
    assert v.grad is not None and all(p.grad is not None for p in mixer.axis_factors.parameters())


def test_other_dtypes_and_dense_axes_keep_the_library_path():
    x, bases, lams = _problem((2, 6, 5, 2, 3), (1, 2), (3, 3))
    assert not native_applies(x.double(), [u.double() for u in bases], (1, 2))
    # axis 2 would be dense (a causal factor): not every grid axis
    assert not native_applies(x, bases[:1], (1,))
    assert native_applies(x, bases, (1, 2))


def test_the_custom_ops_pass_torch_opcheck():
    # non-contiguous inputs (QR's column-major bases, a transposed scale, as compiled graphs
    # produce): the fake kernels must report the contiguous outputs the real ones return
    x, bases, lams = _problem((2, 6, 5, 2, 3), (1, 2), (3, 4))
    scale = torch.rand(2, 12).t().requires_grad_()
    bases = [u.detach() for u in bases]
    torch.library.opcheck(tucker_chain, (x, bases, scale, [1, 2]))
    intermediates = tucker_chain(x, bases, scale, [1, 2])[1:]
    torch.library.opcheck(
        tucker_chain_backward,
        (
            torch.randn(x.shape),
            x.detach(),
            bases,
            scale.detach(),
            [1, 2],
            [t.detach() for t in intermediates],
        ),
    )


def test_torch_compile_runs_the_kernel_and_matches_eager():
    mixer = ConcentrationMixer(8, "6x5", num_heads=2, rank=3)
    v = torch.randn(2, 6, 5, 8, requires_grad=True)
    # no C++ codegen: the op's fake kernels and autograd
    compiled = torch.compile(mixer.mix, backend="aot_eager")
    out = compiled(v)
    torch.testing.assert_close(out, mixer.mix(v), **F32)
    (grad,) = torch.autograd.grad(out.sum(), v)
    torch.testing.assert_close(grad, torch.autograd.grad(mixer.mix(v).sum(), v)[0], **F32)


def test_the_constant_marker_is_torchs_own_and_costs_no_dynamo_import():
    import subprocess
    import sys

    def probe() -> bool:
        return True

    marked = assume_constant_result(lambda: True)
    # the same mark torch.compile reads
    assert vars(torch.compiler.assume_constant_result(probe)) == vars(marked)
    code = (
        "import sys, gridmix.mixers.concentration.ops.native_build as b; "
        "print('torch._dynamo' in sys.modules, b.native_available._dynamo_marked_constant)"
    )
    assert subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split() == ["False", "True"]


def test_flops_are_counted_on_real_and_fake_tensors():
    mixer = ConcentrationMixer(16, "16x16", num_heads=2, rank=4)
    v = torch.randn(2, 16, 16, 16)

    class Mix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mixer = mixer

        def forward(self, v):
            return self.mixer.mix(v.requires_grad_())

    real = count_flops(Mix(), v)
    fake, _ = dry_run(Mix(), v)
    chain = chain_flops((2, 16, 16, 2, 8), [1, 2], [4, 4])
    for flops in (real, fake):
        assert flops.per_op["gridmix.tucker_chain"] == chain
        assert flops.per_op["gridmix.tucker_chain_backward"] == 2 * chain
        assert not flops.uncounted


def test_the_kernel_without_its_formula_would_be_reported_uncounted(monkeypatch):
    from torch.utils import flop_counter

    monkeypatch.delitem(flop_counter.flop_registry, torch.ops.gridmix.tucker_chain)
    mixer = ConcentrationMixer(16, "8x8", num_heads=2, rank=4)
    mix = torch.nn.Module()
    mix.forward = mixer.mix
    assert (
        "gridmix.tucker_chain"
        in count_flops(mix, torch.randn(2, 8, 8, 16), backward=False).uncounted
    )


def test_without_a_compiler_gridmix_warns_once_and_uses_library_gemms(fresh_library, tmp_path):
    fresh_library.setenv("GRIDMIX_CACHE_DIR", str(tmp_path))
    fresh_library.setenv("CC", "no-such-compiler")
    x, bases, lams = _problem((2, 6, 5, 2, 3), (1, 2), (3, 3))
    with pytest.warns(RuntimeWarning, match="no C compiler 'no-such-compiler'.*using torch ops"):
        out = tucker(x, bases, (1, 2), eigenvalues=lams)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not native_applies(x, bases, (1, 2))  # the verdict is cached: no second warning
    torch.testing.assert_close(out, _library(x, bases, lams, (1, 2)))


def test_a_failing_compile_is_reported_with_its_first_error_line(fresh_library, tmp_path):
    fresh_library.setenv("GRIDMIX_CACHE_DIR", str(tmp_path))
    fresh_library.setenv("CC", "false")  # runs, prints nothing, exits 1
    with pytest.warns(RuntimeWarning, match="unavailable"):
        assert native_library() is None


def test_gridmix_native_0_disables_the_kernel_silently_and_builds_nothing(fresh_library, tmp_path):
    fresh_library.setenv("GRIDMIX_CACHE_DIR", str(tmp_path))
    fresh_library.setenv("GRIDMIX_NATIVE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not native_available()
    assert not list(tmp_path.iterdir())


def test_set_native_overrides_the_variable_both_ways(fresh_library):
    x, bases, _ = _problem((2, 6, 5, 2, 3), (1, 2), (3, 3))
    try:
        fresh_library.setenv("GRIDMIX_NATIVE", "0")
        set_native(True)
        assert native_applies(x, bases, (1, 2))
        fresh_library.setenv("GRIDMIX_NATIVE", "1")
        set_native(False)
        assert not native_applies(x, bases, (1, 2))
        set_native(None)  # back to the variable
        assert native_applies(x, bases, (1, 2))
    finally:
        set_native(None)
    with pytest.raises(
        TypeError, match="set_native\\(enabled='no'\\); expected True, False or None"
    ):
        set_native("no")


def test_a_plain_flop_counter_counts_the_kernel_without_gridmix_analysis():
    from torch.utils.flop_counter import FlopCounterMode

    mixer = ConcentrationMixer(16, "8x8", num_heads=2, rank=4)
    v = torch.randn(2, 8, 8, 16)
    with FlopCounterMode(display=False) as counter:
        mixer.mix(v)
    counts = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    assert counts["gridmix.tucker_chain"] == chain_flops((2, 8, 8, 2, 8), (1, 2), (4, 4))


def test_the_kernel_is_built_once_into_the_cache(fresh_library, tmp_path):
    fresh_library.setenv("GRIDMIX_CACHE_DIR", str(tmp_path))
    assert native_library() is not None
    built = list(tmp_path.glob("gridmix_native-*.so"))
    # no temporary left behind
    assert len(built) == 1 and not [p for p in tmp_path.iterdir() if p.is_dir()]
    stamp = built[0].stat().st_mtime_ns
    forget_library()
    assert native_library() is not None
    assert built[0].stat().st_mtime_ns == stamp  # loaded from the cache, not rebuilt


def test_double_backward_runs_through_the_library_form():
    # The chain is linear in x: Jᵀu by a backward with create_graph, then J v = ∂⟨Jᵀu, v⟩/∂u = the
    # chain at v.
    x, bases, lams = _problem((2, 12, 10, 2, 4), (1, 2), (4, 5))
    y = tucker(x, bases, (1, 2), eigenvalues=lams)
    u = torch.zeros_like(y, requires_grad=True)
    (transpose_u,) = torch.autograd.grad(y, x, u, create_graph=True)
    v = torch.randn_like(x)
    (jv,) = torch.autograd.grad(transpose_u, u, v)
    torch.testing.assert_close(jv, tucker(v, bases, (1, 2), eigenvalues=lams).detach(), **F32)
