"""The one training path every model and track shares (docs/design.md section 5, "Paired seeds").

Seed ``s`` fixes the data (the track generates it from ``s``), the batch order (a generator seeded
with ``s``) and the initialisation (``torch.manual_seed(s)`` right before the model is built), for
every model alike. Optimiser: AdamW (torch's fused kernel, :func:`adamw`) with linear warm-up then
cosine decay over all steps, gradients clipped at norm 1. Validation every epoch; the test metric
(and the track's ``extra_metrics``, kept in the run's extras) is taken once, from the final model,
or with ``Budget.patience`` from the best validation epoch's (:mod:`gridmix.study.early_stopping`;
epochs are the cap). The extras also say whether the test predictions were one constant
(:func:`prediction_summary`), which the report flags on that seed. A non-finite loss stops the run
at the end of its epoch, which is then recorded as diverged: it never raises. On the CPU, the same
arguments and thread count give the same numbers.

No step waits for the device: the training split moves to the device once, each epoch's batch order
once, and the step losses are read back once per epoch (:func:`train_epoch`); validation, once per
epoch, is the only other read. The learning-rate schedule advances every step, a float16 step the
loss scaler skipped included, as torch's mixed-precision recipe does (asking the scaler whether it
skipped would wait for the device).

With ``compile=True`` the training steps and the evaluations run the model compiled with
``torch.compile`` (:mod:`gridmix.study.compiling`: eager when it cannot be compiled, the run's
``extras["compile"]`` saying so); the analyses after training get the eager module.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from gridmix.core.grid import Grid
from gridmix.study.compiling import compile_model
from gridmix.study.early_stopping import EarlyStopping
from gridmix.study.precision import autocast, grad_scaler
from gridmix.tracks import ModelSpec, Split, Track, TrackData
from gridmix.tracks.budget import Budget


@dataclass
class RunResult:
    status: str  # "ok", "diverged" or "failed"
    val_metric: float | None = None  # final epoch's validation metric (what the sweep chooses on)
    test_metric: float | None = None
    train_loss: list[float] = field(default_factory=list)  # per epoch, mean over batches
    val_curve: list[float] = field(default_factory=list)  # per epoch
    epochs_done: int = 0
    wall_s: float = 0.0
    error: str = ""
    # what ``after_training`` measured on the final model
    extras: dict = field(default_factory=dict)


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when available; ``cuda`` without a GPU is a ValueError."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device 'cuda' was asked for but torch sees no CUDA device; use --device cpu or auto"
        )
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device {device!r}; expected 'auto', 'cpu' or 'cuda'")
    return torch.device(device)


@torch.no_grad()
def predict(
    model: torch.nn.Module,
    split: Split,
    *,
    batch_size: int,
    device: torch.device,
    precision: str = "fp32",
) -> torch.Tensor:
    """The model's predictions for a whole split, in batches (in ``precision``), as float32 on the
    CPU."""
    model.eval()
    with autocast(precision, device):
        preds = [
            model(split.inputs[i : i + batch_size].to(device)).float().cpu()
            for i in range(0, len(split), batch_size)
        ]
    return torch.cat(preds)


def evaluate(
    model: torch.nn.Module,
    split: Split,
    metric: Callable,
    *,
    batch_size: int,
    device: torch.device,
    precision: str = "fp32",
) -> float:
    """The track's metric over a whole split (metric in float32)."""
    return float(
        metric(
            predict(model, split, batch_size=batch_size, device=device, precision=precision),
            split.targets,
        )
    )


def prediction_summary(predictions: torch.Tensor, targets: torch.Tensor) -> dict:
    """Whether a split's predictions are one constant, which means the model ignores its inputs: for
    class labels (S,) the arg-max class of every sample (``classes_predicted``: how many classes
    occur), otherwise every sample's prediction equal to the first's within float32 round-off (1e-6
    of its largest magnitude)."""
    if targets.dtype == torch.int64 and targets.ndim == 1 and predictions.ndim == 2:
        classes = int(predictions.argmax(-1).unique().numel())  # predictions (S, K) logits
        return {"constant": classes == 1, "classes_predicted": classes}
    flat = predictions.reshape(len(predictions), -1)  # (S, everything a sample predicts)
    spread = float((flat - flat[:1]).abs().max())
    return {"constant": spread <= 1e-6 * (1.0 + float(flat[0].abs().max()))}


def warmup_cosine(total_steps: int, warmup_frac: float) -> Callable[[int], float]:
    warmup = max(1, int(total_steps * warmup_frac))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def adamw(model: torch.nn.Module, *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over ``model``'s parameters, with torch's fused kernel where every parameter is real
    floating point (one kernel per step instead of a loop over the tensors; the same update rule,
    elementwise, so independent of the thread count)."""
    params = list(model.parameters())
    fused = all(p.is_floating_point() for p in params) or None
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused)


def train_epoch(
    model: torch.nn.Module,
    loss_fn: Callable,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    permutation: torch.Tensor,
    batch_size: int,
    *,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    precision: str,
    device: torch.device,
) -> list[float]:
    """One epoch of steps over ``permutation``'s batches; the loss of every step, read from the
    device once, at the end (no step waits for the device).

    A step with a non-finite loss still updates the model (its parameters may turn non-finite too);
    the caller stops the run on the first one (:func:`first_non_finite`), at most one epoch late.
    An exception after such a step is the divergence surfacing, so the losses up to it are returned.
    """
    losses = []  # 0-d tensors on the device
    try:
        for i in range(0, len(permutation), batch_size):
            index = permutation[i : i + batch_size]  # (b,)
            x, y = inputs[index], targets[index]  # (b, N, C_in), the track's targets
            with autocast(precision, device):
                loss = loss_fn(model(x).float(), y)  # ()
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)  # fp16: skipped where the gradients are not finite
            scaler.update()
            schedule.step()  # every step, as torch's mixed-precision recipe does
            losses.append(loss.detach())
    except Exception:
        if first_non_finite(_read(losses)) is None:
            raise
    return _read(losses)


def _read(losses: list[torch.Tensor]) -> list[float]:
    """The step losses as Python floats: one device-to-host copy."""
    return torch.stack(losses).tolist() if losses else []  # (steps,) -> list


def first_non_finite(losses: list[float]) -> tuple[int, float] | None:
    """The first step whose loss is not finite, with that loss, or None."""
    return next(
        ((step, value) for step, value in enumerate(losses) if not math.isfinite(value)), None
    )


def train_run(
    track: Track,
    spec: ModelSpec,
    grid: Grid,
    *,
    lr: float,
    seed: int,
    budget: Budget,
    init_seed: int | None = None,
    data: TrackData,
    device: torch.device,
    model_kwargs: dict | None = None,
    precision: str = "fp32",
    stop_at: float | None = None,
    compile: bool = False,
    on_epoch: Callable[[int, float, float], None] | None = None,
    after_training: Callable[[torch.nn.Module, TrackData], dict] | None = None,
) -> RunResult:
    """Train ``spec`` on ``data`` (made by ``track`` from ``seed``) and measure it; never raises for
    a bad run.

    ``on_epoch(epoch, train_loss, val_metric)`` is called after every epoch (progress bars);
    ``after_training(model, data)`` analyses the final model of a successful run (e.g. its
    mechanism). ``init_seed`` (default ``seed``) seeds the initialisation alone: an A/A copy differs
    from its original there. ``precision``: ``fp32``, or ``bf16`` / ``fp16`` mixed precision
    (:mod:`gridmix.study.precision`). ``stop_at``: stop after the first epoch whose validation
    metric reaches it (at or below it for a ``"lower"`` metric, at or above for ``"higher"``), the
    run's ``extras["training"]["stop_reason"]`` saying so. ``compile``: train and evaluate the
    model compiled (:func:`gridmix.study.compiling.compile_model`, warmed up on the first training
    batch and the first validation batch).
    """
    result = RunResult(status="ok")
    left_chance = ""
    start = time.perf_counter()
    try:
        torch.manual_seed(seed if init_seed is None else init_seed)
        model = spec.build(grid, **(model_kwargs or {})).to(device)
        optimizer = adamw(model, lr=lr, weight_decay=budget.weight_decay)
        n = len(data.train)
        steps_per_epoch = math.ceil(n / budget.batch_size)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, warmup_cosine(steps_per_epoch * budget.epochs, budget.warmup_frac)
        )
        scaler = grad_scaler(precision, device)
        order = torch.Generator().manual_seed(seed)
        stopper = EarlyStopping(budget.patience, direction=track.direction)
        train_x = data.train.inputs.to(device)  # the whole training split, moved once
        train_y = data.train.targets.to(device)
        forward = model  # what the steps and evaluations call: the model, or it compiled
        if compile:

            def warm_up(compiled: torch.nn.Module) -> None:
                compiled.train()
                with autocast(precision, device):
                    x = train_x[: budget.batch_size]  # (b, N, C_in)
                    loss = track.loss(compiled(x).float(), train_y[: budget.batch_size])  # ()
                loss.backward()
                eval_batch = slice(budget.batch_size * 2)
                predict(
                    compiled,
                    Split(data.val.inputs[eval_batch], data.val.targets[eval_batch]),
                    batch_size=budget.batch_size * 2,
                    device=device,
                    precision=precision,
                )

            forward, result.extras["compile"] = compile_model(model, warm_up, device)
        for epoch in range(budget.epochs):
            model.train()
            permutation = torch.randperm(n, generator=order).to(device)  # (n,)
            losses = train_epoch(
                forward,
                track.loss,
                train_x,
                train_y,
                permutation,
                budget.batch_size,
                optimizer=optimizer,
                scaler=scaler,
                schedule=schedule,
                precision=precision,
                device=device,
            )
            diverged = first_non_finite(losses)
            if diverged is not None:
                step, value = diverged
                result.status = "diverged"
                result.error = f"non-finite training loss ({value}) at epoch {epoch}, step {step}"
                return result
            val = evaluate(
                forward,
                data.val,
                track.metric,
                batch_size=budget.batch_size * 2,
                device=device,
                precision=precision,
            )
            result.train_loss.append(sum(losses) / len(losses))
            result.val_curve.append(val)
            result.epochs_done = epoch + 1
            if not math.isfinite(val):
                result.status, result.error = (
                    "diverged",
                    f"non-finite validation metric at epoch {epoch}",
                )
                return result
            if on_epoch is not None:
                on_epoch(epoch, result.train_loss[-1], val)
            if stopper.update(val, model):
                break
            if stop_at is not None and (
                val <= stop_at if track.direction == "lower" else val >= stop_at
            ):
                left_chance = (
                    f"left chance at epoch {epoch}: validation metric {val:.4g} "
                    f"reached {stop_at:.4g} (--stop-above-chance)"
                )
                break
        stopper.restore(model)
        result.val_metric = result.val_curve[stopper.best_epoch if budget.patience else -1]
        result.extras["training"] = stopper.summary()
        if left_chance:
            result.extras["training"].update(improving_at_cap=False, stop_reason=left_chance)
        predictions = predict(
            forward, data.test, batch_size=budget.batch_size * 2, device=device, precision=precision
        )
        result.test_metric = float(track.metric(predictions, data.test.targets))
        result.extras["test_predictions"] = prediction_summary(predictions, data.test.targets)
        if not math.isfinite(result.test_metric):
            result.status, result.error = "diverged", "non-finite test metric"
            return result
        if track.extra_metrics:
            result.extras["test_metrics"] = {
                name: float(measure(predictions, data.test.targets))
                for name, measure in track.extra_metrics.items()
            }
        if after_training is not None:
            result.extras.update(after_training(model, data))
    # a broken model or plugin is a recorded failure, not a crashed sweep
    except Exception as error:
        result.status, result.error = "failed", f"{type(error).__name__}: {error}"
    finally:
        result.wall_s = time.perf_counter() - start
    return result
