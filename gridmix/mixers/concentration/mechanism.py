"""The concentration mixer's mechanism analysis (its ``MixerSpec.mechanism``): does a trained
model's mixer keep the certificate docs/design.md section 2 promises?

This checks the code, not the idea: a symmetric factor's largest singular value *is* ``max
sigmoid(θ)`` by construction, so "largest singular value ≤ bound" fails only if the parametrisation
is broken (e.g. a basis that lost orthonormality). Whether the concentration constraint *helps* is
the ablation comparison in the report (docs/analysis.md, "Mechanism").

For every :class:`~gridmix.mixers.concentration.layer.ConcentrationMixer` in a model, per axis and
head:

* the factor spectrum: singular values of the dense factor ``M_k`` (``mixer.factors()``), by
  ``torch.linalg.svdvals`` in float64;
* its largest singular value against the factor's certified bound (``mixer.factor_bounds()``: ``max
  λ`` for a symmetric factor, ``‖κ‖₁`` for a causal one) and the predicted bound 1, and their ratio,
  the tightness: exactly 1 for a symmetric factor with an orthonormal basis, so a symmetric factor
  below 1 has lost basis columns (its operator shrank, though the certificate still holds);
* the certified operator-norm bound ``Π_k ‖M_k‖₂`` (``mixer.spectral_bound()``), which covers the
  grid tokens, and the bound on the whole token map with prefix tokens
  (``mixer.token_map_bound()``);
* the probe norm ratio ``‖M v‖/‖v‖`` of the bare operator (``mixer.mix``) on a fixed-seed Gaussian
  ``v``;
* a power-iteration estimate of the spectral norm of the Jacobian of the residual block that holds
  the mixer (its parent module, e.g. timm's ``Block``) at its real input on a data batch: the
  block's local Lipschitz constant, which has no certificate (``1 + ‖W_o‖‖W_v‖``-like). Power
  iteration on ``JᵀJ`` with backward passes (Golub & Van Loan, *Matrix Computations*, §8.2).

:func:`mechanism_signature` returns the reference report's keys (``factor_largest_singular_values``,
``predicted_factor_bound``, ``observed_max_factor_singular``, ``probe_norm_ratio_after_mixing``,
``confirmed``) plus ``certified_operator_bound``, ``residual_block_lipschitz`` and the per-layer
detail; :func:`combine_signatures` merges every seed's: "confirmed" only if every factor respected
its bound on every seed. A factor respects its bound when ``σ_max ≤ bound · (1 + rtol)`` and ``bound
≤ 1 · (1 + rtol)`` with ``rtol = ROUNDOFF_ULPS · n_k · eps`` (:func:`roundoff_rtol`): the dense
factor is built in its own precision (float32), so its largest singular value may exceed the exact
``max λ`` by round-off that grows with the side ``n_k``; a real violation (a basis that lost
orthonormality, a bound above 1) is orders of magnitude larger. ``worst_factor`` names the factor
closest to (or farthest over) its bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from gridmix.mixers.concentration.factors import SymmetricFactor
from gridmix.mixers.concentration.layer import ConcentrationMixer

PREDICTED_FACTOR_BOUND = 1.0
ROUNDOFF_ULPS = 4  # round-off slack per row of a factor, in units of its dtype's machine epsilon


def block_lipschitz(
    block: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    iterations: int = 20,
    seed: int = 0,
) -> float:
    """Largest singular value of the Jacobian ``J`` of ``block`` at ``x``, by power iteration on
    ``JᵀJ``.

    ``Jᵀu`` is a backward pass; ``Jv`` is the derivative of ``⟨Jᵀu, v⟩`` with respect to ``u`` (the
    double-backward trick, which, unlike ``torch.func``, also runs through custom autograd
    Functions). Returns ``‖J v‖`` for the final unit iterate ``v``: a lower bound on ``‖J‖₂`` that
    converges to it. For a block applied sample by sample, ``J`` is block-diagonal over the batch
    and this is the largest local Lipschitz constant among the samples of ``x``.
    """
    if iterations < 1:
        raise ValueError(f"iterations={iterations}; expected >= 1")
    generator = torch.Generator().manual_seed(seed)
    v = torch.randn(x.shape, generator=generator, dtype=torch.float64).to(
        device=x.device, dtype=x.dtype
    )
    v = v / v.norm()
    sigma = 0.0
    with torch.enable_grad():
        x = x.detach().requires_grad_()
        y = block(x)
        u = torch.zeros_like(y, requires_grad=True)
        (transpose_u,) = torch.autograd.grad(y, x, u, create_graph=True)  # Jᵀu, linear in u
        for _ in range(iterations):
            (jv,) = torch.autograd.grad(transpose_u, u, v, retain_graph=True)  # J v
            sigma = float(jv.norm())
            (w,) = torch.autograd.grad(y, x, jv, retain_graph=True)  # Jᵀ J v
            norm = w.norm()
            if norm == 0:
                break
            v = w / norm
    return sigma


def _mixers(model: nn.Module) -> list[tuple[str, ConcentrationMixer, str, nn.Module]]:
    """``(name, mixer, block name, block)`` for every mixer; the block is the mixer's parent
    module."""
    modules = dict(model.named_modules())
    found = []
    for name, module in modules.items():
        if isinstance(module, ConcentrationMixer):
            parent = name.rpartition(".")[0]
            found.append((name, module, parent, modules[parent] if name else module))
    return found


def _capture_inputs(
    model: nn.Module, blocks: list[nn.Module], inputs: torch.Tensor
) -> dict[int, torch.Tensor]:
    """The first positional input of each block on one forward pass of ``model(inputs)``."""
    captured: dict[int, torch.Tensor] = {}

    def hook(module, args):
        if args and isinstance(args[0], torch.Tensor):
            captured.setdefault(id(module), args[0].detach())

    handles = [block.register_forward_pre_hook(hook) for block in blocks]
    try:
        with torch.no_grad():
            model(inputs)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def roundoff_rtol(length: int, dtype: torch.dtype = torch.float32) -> float:
    """The relative slack for comparing a factor's largest singular value with its bound:
    ``ROUNDOFF_ULPS · n · eps`` for an ``n × n`` factor built in ``dtype`` (4.8e-7 per row in
    float32: 1.5e-5 at n = 32)."""
    if length < 1:
        raise ValueError(f"length={length}; expected a factor side of at least 1")
    return ROUNDOFF_ULPS * length * torch.finfo(dtype).eps


def _axis_report(
    axis: int, mixer: ConcentrationMixer, factor: torch.Tensor, bound: torch.Tensor
) -> dict:
    singular = torch.linalg.svdvals(factor.detach().double())  # (h, n_k), descending
    largest, bound = singular[:, 0], bound.detach().double()  # (h,), (h,)
    kind = "symmetric" if isinstance(mixer.axis_factors[axis], SymmetricFactor) else "causal"
    rtol = roundoff_rtol(factor.shape[-1], factor.dtype)
    return dict(
        axis=axis,
        kind=kind,
        length=factor.shape[-1],
        singular_values=singular.tolist(),
        largest=largest.tolist(),
        bound=bound.tolist(),
        tightness=(largest / bound).tolist(),
        rtol=rtol,
        respects_bound=_respects(largest.tolist(), bound.tolist(), rtol),
    )


def _respects(largest: list[float], bound: list[float], rtol: float) -> bool:
    return all(
        s <= b * (1 + rtol) and b <= PREDICTED_FACTOR_BOUND * (1 + rtol)
        for s, b in zip(largest, bound)
    )


def _axis_rtol(axis: dict) -> float:
    """An axis report's slack; one stored before the slack was (``rtol`` absent) gets float32's for
    its side."""
    return axis["rtol"] if "rtol" in axis else roundoff_rtol(axis.get("length", 1))


def _axis_respects(axis: dict) -> bool:
    return _respects(axis["largest"], axis["bound"], _axis_rtol(axis))


def _worst_factor(layers: list[dict], seed: int | None = None) -> dict:
    """The factor (layer, axis, head) with the largest excess over its bounds: ``excess`` is the
    larger of ``σ_max / bound − 1`` and ``bound / 1 − 1`` (negative when within), beside the slack
    ``rtol`` it is judged by."""
    worst = None
    for layer in layers:
        for axis in layer["axes"]:
            for head, (largest, bound) in enumerate(zip(axis["largest"], axis["bound"])):
                excess = max(
                    largest / bound - 1 if bound > 0 else float("inf"),
                    bound / PREDICTED_FACTOR_BOUND - 1,
                )
                if worst is None or excess > worst["excess"]:
                    worst = dict(
                        layer=layer.get("name", ""),
                        axis=axis.get("axis"),
                        head=head,
                        largest=largest,
                        bound=bound,
                        excess=excess,
                        rtol=_axis_rtol(axis),
                    )
    return worst if seed is None else dict(worst, seed=seed)


def mechanism_signature(
    model: nn.Module, inputs: torch.Tensor, *, seed: int = 0, iterations: int = 20
) -> dict:
    """The mechanism of every mixer in ``model``, as a JSON-ready dict (see the module docstring).

    ``inputs`` is a batch of the track's inputs on the model's device (the residual blocks' inputs
    are captured from ``model(inputs)``); ``seed`` fixes the probe and the power iteration's start.
    The model is analysed in eval mode and its mode restored. ``ValueError`` if the model has no
    mixer.
    """
    mixers = _mixers(model)
    if not mixers:
        raise ValueError(
            f"{type(model).__name__} holds no ConcentrationMixer; mechanism analysis needs the "
            "idea model"
        )
    was_training = model.training
    model.eval()
    try:
        block_inputs = _capture_inputs(model, [block for *_, block in mixers], inputs)
        layers = [
            _layer_report(
                name,
                mixer,
                block_name,
                block,
                block_inputs.get(id(block)),
                seed=seed,
                iterations=iterations,
            )
            for name, mixer, block_name, block in mixers
        ]
    finally:
        model.train(was_training)
    return _summarise(layers)


def _layer_report(
    name: str,
    mixer: ConcentrationMixer,
    block_name: str,
    block: nn.Module,
    block_input: torch.Tensor | None,
    *,
    seed: int,
    iterations: int,
) -> dict:
    with torch.no_grad():
        axes = [
            _axis_report(k, mixer, f, b)
            for k, (f, b) in enumerate(zip(mixer.factors(), mixer.factor_bounds()))
        ]
        ref = next(mixer.parameters())
        generator = torch.Generator().manual_seed(seed)
        probe = torch.randn(1, *mixer.grid, mixer.dim, generator=generator).to(ref)  # (1, *grid, C)
        ratio = float(mixer.mix(probe).norm() / probe.norm())
        certified = mixer.spectral_bound().double().tolist()  # (h,)
        token_map = mixer.token_map_bound().double().tolist()  # (h,): prefix tokens included
    report = dict(
        name=name,
        grid=str(mixer.grid),
        heads=mixer.num_heads,
        axes=axes,
        certified_operator_bound=certified,
        certified_token_map_bound=token_map,
        probe_norm_ratio=ratio,
        block=block_name or "(model)",
        residual_block_lipschitz=None,
    )
    if block_input is None:
        report["lipschitz_error"] = (
            "the block's input was not captured (it received no positional tensor)"
        )
        return report
    try:
        report["residual_block_lipschitz"] = block_lipschitz(
            block, block_input, iterations=iterations, seed=seed
        )
    # an op without double backward must not lose the rest of the analysis
    except Exception as error:
        report["lipschitz_error"] = f"{type(error).__name__}: {error}"
    return report


def _max_or_none(values) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def _summarise(layers: list[dict]) -> dict:
    """The reference report's keys, computed from per-layer detail."""
    largest = [max(axis["largest"]) for layer in layers for axis in layer["axes"]]
    return dict(
        factor_largest_singular_values=largest,
        predicted_factor_bound=PREDICTED_FACTOR_BOUND,
        observed_max_factor_singular=max(largest),
        probe_norm_ratio_after_mixing=max(layer["probe_norm_ratio"] for layer in layers),
        confirmed=all(_axis_respects(axis) for layer in layers for axis in layer["axes"]),
        worst_factor=_worst_factor(layers),
        certified_operator_bound=max(max(layer["certified_operator_bound"]) for layer in layers),
        certified_token_map_bound=max(max(layer["certified_token_map_bound"]) for layer in layers),
        residual_block_lipschitz=_max_or_none(
            layer["residual_block_lipschitz"] for layer in layers
        ),
        layers=layers,
    )


def combine_signatures(per_seed: Mapping[int, dict]) -> dict:
    """Every seed's signature in one: the reference report's keys as the worst case over seeds, plus
    ``per_seed``.

    ``confirmed`` is recomputed from the detail: true only if every factor respected its bound on
    every seed. ``factor_largest_singular_values`` keeps one entry per (layer, axis), the largest
    over seeds.
    """
    if not per_seed:
        raise ValueError(
            "per_seed is empty; expected {seed: mechanism_signature(...)} for at least one seed"
        )
    signatures = [per_seed[seed] for seed in sorted(per_seed)]
    counts = {len(s["factor_largest_singular_values"]) for s in signatures}
    if len(counts) != 1:
        raise ValueError(
            f"the seeds' models have different numbers of factors {sorted(counts)}; expected one "
            "model"
        )
    largest = [
        max(values) for values in zip(*(s["factor_largest_singular_values"] for s in signatures))
    ]
    return dict(
        factor_largest_singular_values=largest,
        predicted_factor_bound=PREDICTED_FACTOR_BOUND,
        observed_max_factor_singular=max(largest),
        probe_norm_ratio_after_mixing=max(s["probe_norm_ratio_after_mixing"] for s in signatures),
        confirmed=all(
            _axis_respects(axis)
            for s in signatures
            for layer in s["layers"]
            for axis in layer["axes"]
        ),
        worst_factor=max(
            (_worst_factor(per_seed[seed]["layers"], seed) for seed in sorted(per_seed)),
            key=lambda factor: factor["excess"],
        ),
        certified_operator_bound=max(s["certified_operator_bound"] for s in signatures),
        certified_token_map_bound=_max_or_none(
            s.get("certified_token_map_bound") for s in signatures
        ),
        residual_block_lipschitz=_max_or_none(s["residual_block_lipschitz"] for s in signatures),
        n_seeds=len(signatures),
        per_seed=[dict(seed=int(seed), **per_seed[seed]) for seed in sorted(per_seed)],
    )
