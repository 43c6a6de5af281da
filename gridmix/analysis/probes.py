"""The fitted references a reviewer tries first (:mod:`gridmix.analysis.references` scores them): a
ridge autoregression on the models' own input window (as given, or normalised per window as the
forecasting tracks' models see it), a logistic-regression probe and 1-NN on the flattened inputs
(1-NN raw or standardised), and the dominant period of the training windows for the seasonal-naive
reference.

Each one is fitted on the training split and has its settings chosen on the validation split by the
track's own metric (``score(predictions, split)``, lower or higher is better as the track says; 1-NN
by its validation hits); a penalty chosen at either end of its grid is marked (``"edge"``), since
the best may lie beyond it. Ridge and the dominant period are closed forms in numpy float64; the
logistic probe is fitted by torch's full-batch L-BFGS (float32), 1-NN uses ``torch.cdist``. Nothing
here is random: the same data gives the same references.

Shape legend: S samples, F flattened input features (C·L for a forecast window, C·H·W for an image),
H horizon, K classes, L context length.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from gridmix.tracks import Split

RIDGE_ALPHAS = tuple(10.0**k for k in range(-6, 3))  # × the mean eigenvalue of the centred XᵀX / S
PER_WINDOW = "per-window normalised"
RIDGE_INPUTS = (
    "standardised",
    PER_WINDOW,
)  # the windows as the track gives them; each by its own mean and spread
WINDOW_EPS = 1e-5  # added to a window's standard deviation, as RevIN adds it
NN_INPUTS = (
    "raw",
    "standardised",
)  # 1-NN on the inputs as the models see them, or standardised per feature
# Strongest first, each fit starting from the previous one's weights: at 1 or 10 the probe is nearly
# the class prior, which a cross-entropy needs when the pixels overfit (128 images of 1024 pixels:
# the weakest penalties overfit).
LOGISTIC_L2 = (1e1, 1e0, 1e-1, 1e-2, 1e-3, 1e-4)
LOGISTIC_MAX_ITER = 100  # L-BFGS iterations per penalty
PERIOD_TOLERANCE = (
    0.9  # the dominant period: the shortest autocorrelation peak within 90 % of the highest
)
NN_CHUNK = 1024  # test rows per distance block of 1-NN

# the track's metric of predictions on a split, signed: lower is better
Score = Callable[[torch.Tensor, Split], float]


def _features(train: Split, *others: Split) -> tuple[torch.Tensor, ...]:
    """Every split's inputs flattened to (S, F) float32 and standardised with the training split's
    per-feature mean and standard deviation (a feature constant in training is only centred)."""
    x = train.inputs.flatten(1).float()  # (S, F)
    mean, std = x.mean(0), x.std(0) if len(x) > 1 else torch.ones(x.shape[1])
    std = torch.where(std > 0, std, torch.ones_like(std))
    return tuple((split.inputs.flatten(1).float() - mean) / std for split in (train, *others))


def ridge_forecasts(
    train: Split, val: Split, test: Split, score: Score
) -> tuple[torch.Tensor, dict]:
    """Test forecasts (S, H) of a ridge regression from the whole input window (every channel) to
    the horizon, with an unpenalised intercept, on each of :data:`RIDGE_INPUTS`: the windows as the
    track gives them (standardised with the training part's statistics), and each window normalised
    by its own mean and standard deviation per channel, the forecast mapped back with channel 0's
    (as the forecasting tracks' RevIN does for their models). The inputs and the penalty ``alpha ·
    mean eigenvalue`` (among :data:`RIDGE_ALPHAS`) are chosen together on validation. Returns the
    forecasts and ``{"inputs", "alpha", "grid", "edge"}`` (:func:`edge`)."""
    fits = {kind: _ridge_fit(train, per_window=kind == PER_WINDOW) for kind in RIDGE_INPUTS}
    kind, alpha = min(
        ((kind, alpha) for kind in RIDGE_INPUTS for alpha in RIDGE_ALPHAS),
        key=lambda choice: score(fits[choice[0]](val, choice[1]), val),
    )
    return fits[kind](test, alpha), {
        "inputs": kind,
        "alpha": alpha,
        "grid": [RIDGE_ALPHAS[0], RIDGE_ALPHAS[-1]],
        "edge": edge(alpha, RIDGE_ALPHAS),
    }


def window_statistics(inputs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Each window's mean and standard deviation (population, plus :data:`WINDOW_EPS`) per channel,
    (S, C, 1) each, from inputs (S, C, L): RevIN's statistics."""
    x = inputs.double().numpy()  # (S, C, L)
    return x.mean(-1, keepdims=True), x.std(-1, keepdims=True) + WINDOW_EPS  # (S, C, 1), (S, C, 1)


def _ridge_fit(train: Split, *, per_window: bool) -> Callable[[Split, float], torch.Tensor]:
    """The closed-form ridge fit on the training windows (normalised per window or not):
    ``forecast(split, alpha)`` gives a split's forecasts (S, H) in the targets' units."""

    def design(split: Split) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The split's features (S, F) and the shift and scale (S, 1) that map a forecast back to
        target units."""
        x = split.inputs.double().numpy()  # (S, C, L)
        if not per_window:
            return x.reshape(len(x), -1), np.zeros((len(x), 1)), np.ones((len(x), 1))
        mean, std = window_statistics(split.inputs)  # (S, C, 1) each
        return (
            ((x - mean) / std).reshape(len(x), -1),
            mean[:, 0],
            std[:, 0],
        )  # (S, F), (S, 1), (S, 1)

    x, shift, scale_back = design(train)  # (S, F), (S, 1), (S, 1)
    y = (train.targets.double().numpy() - shift) / scale_back  # (S, H): in the features' units
    x_mean, y_mean = x.mean(0), y.mean(0)
    u, s, vt = np.linalg.svd(x - x_mean, full_matrices=False)  # (S, r), (r,), (r, F)
    projected = u.T @ (y - y_mean)  # (r, H)
    # mean eigenvalue of the centred XᵀX (1: inputs constant)
    scale = float((s**2).sum() / max(1, x.shape[1])) or 1.0

    def forecast(split: Split, alpha: float) -> torch.Tensor:
        weights = vt.T @ ((s / (s**2 + alpha * scale))[:, None] * projected)  # (F, H)
        features, offset, factor = design(split)  # (S, F), (S, 1), (S, 1)
        predictions = ((features - x_mean) @ weights + y_mean) * factor + offset  # (S, H)
        return torch.from_numpy(predictions).to(split.targets.dtype)

    return forecast


def edge(chosen: float, grid: tuple[float, ...]) -> str | None:
    """``"smallest"`` / ``"largest"`` when ``chosen`` is that end of its penalty ``grid``, else
    None: the best penalty may lie beyond the grid."""
    if chosen == min(grid):
        return "smallest"
    return "largest" if chosen == max(grid) else None


def logistic_logits(
    train: Split, val: Split, test: Split, classes: int, score: Score
) -> tuple[torch.Tensor, dict]:
    """Test log-probabilities (S, K) of multinomial logistic regression on the standardised
    flattened inputs, L2 penalty ``l2 · ‖W‖²`` chosen on validation among :data:`LOGISTIC_L2`.
    Returns them and ``{"l2": chosen, "grid", "edge"}`` (:func:`edge`)."""
    x_train, x_val, x_test = _features(train, val, test)
    linear = torch.nn.Linear(x_train.shape[1], classes)
    torch.nn.init.zeros_(linear.weight)
    torch.nn.init.zeros_(linear.bias)
    best = None
    for l2 in LOGISTIC_L2:
        optimizer = torch.optim.LBFGS(
            linear.parameters(), max_iter=LOGISTIC_MAX_ITER, line_search_fn="strong_wolfe"
        )

        def closure(l2=l2, optimizer=optimizer):
            optimizer.zero_grad()
            loss = (
                torch.nn.functional.cross_entropy(linear(x_train), train.targets)
                + l2 * linear.weight.square().sum()
            )
            loss.backward()
            return loss

        with torch.enable_grad():
            optimizer.step(closure)
        with torch.no_grad():
            value = score(torch.log_softmax(linear(x_val), -1), val)
            if best is None or value < best[0]:
                best = (value, l2, torch.log_softmax(linear(x_test), -1))  # (S, K)
    return best[2], {
        "l2": best[1],
        "grid": [min(LOGISTIC_L2), max(LOGISTIC_L2)],
        "edge": edge(best[1], LOGISTIC_L2),
    }


def nearest_labels(
    reference: torch.Tensor, labels: torch.Tensor, queries: torch.Tensor
) -> torch.Tensor:
    """The label of each query's nearest reference row (Euclidean; the first on a tie): (S_q,) from
    (S_r, F)."""
    found = [
        labels[torch.cdist(queries[i : i + NN_CHUNK], reference).argmin(1)]
        for i in range(0, len(queries), NN_CHUNK)
    ]
    return torch.cat(found)


def nearest_neighbour_logits(
    train: Split, val: Split, test: Split, classes: int
) -> tuple[torch.Tensor, dict]:
    """Test log-probabilities (S, K) of 1-NN on the flattened inputs, raw (as the models see them)
    or standardised per feature (:data:`NN_INPUTS`), whichever labels more validation samples right
    (raw on a tie): the neighbour's label gets the probability ``q`` that 1-NN is right on
    validation (hits + ½ over n + 1, at least 1/K), the other classes share the rest, so a
    cross-entropy stays finite and an accuracy scores the neighbour's label. Returns them and
    ``{"inputs": the choice, "validation_accuracy": q, "validation_hits": {inputs: hits}}``."""
    raw = tuple(split.inputs.flatten(1).float() for split in (train, val, test))  # (S, F) each
    features = dict(zip(NN_INPUTS, (raw, _features(train, val, test))))
    hits = {
        inputs: int((nearest_labels(x_train, train.targets, x_val) == val.targets).sum())
        for inputs, (x_train, x_val, _) in features.items()
    }
    chosen = max(NN_INPUTS, key=lambda inputs: (hits[inputs], inputs == "raw"))
    x_train, _, x_test = features[chosen]
    q = max((hits[chosen] + 0.5) / (len(val) + 1), 1.0 / classes)
    predicted = nearest_labels(x_train, train.targets, x_test)  # (S,)
    probabilities = torch.full((len(test), classes), (1 - q) / max(1, classes - 1))
    probabilities[torch.arange(len(test)), predicted] = q
    return probabilities.log(), {
        "inputs": chosen,
        "validation_accuracy": q,
        "validation_hits": hits,
    }


def dominant_period(inputs: torch.Tensor) -> int | None:
    """The dominant period of the windows' first channel (S, C, L): the shortest lag in 2 … L/2 at
    which the autocorrelation pooled over the windows (each window centred) has a positive local
    peak within :data:`PERIOD_TOLERANCE` of the highest such peak; ``None`` when there is no peak (a
    trend, noise)."""
    x = inputs[:, 0, :].double().numpy()  # (S, L)
    x = x - x.mean(1, keepdims=True)
    power = float((x**2).mean())
    max_lag = x.shape[1] // 2
    if power == 0 or max_lag < 3:
        return None
    acf = np.array(
        [1.0] + [float((x[:, :-m] * x[:, m:]).mean()) / power for m in range(1, max_lag + 1)]
    )
    peaks = [
        m for m in range(2, max_lag) if acf[m] > 0 and acf[m] > acf[m - 1] and acf[m] >= acf[m + 1]
    ]
    if not peaks:
        return None
    highest = max(acf[m] for m in peaks)
    return min(m for m in peaks if acf[m] >= PERIOD_TOLERANCE * highest)
