"""Early stopping on a validation plateau, with the best checkpoint restored (docs/design.md section
5).

:class:`EarlyStopping` watches the validation metric once per epoch; after ``patience`` epochs
without improvement it says stop, and :meth:`EarlyStopping.restore` puts back the weights of the
best epoch, so the test metric is taken from the model the validation split chose. The epoch count
of the budget stays the cap. ``patience=None`` never stops early (the final epoch's model is kept).
``summary`` is what the ledger keeps: the best epoch, whether the run stopped early, and whether it
was still improving when the cap ended it.
"""

from __future__ import annotations

import copy

import torch


class EarlyStopping:
    def __init__(self, patience: int | None, *, direction: str) -> None:
        if patience is not None and patience < 1:
            raise ValueError(f"patience={patience}; expected None or an integer >= 1")
        if direction not in ("lower", "higher"):
            raise ValueError(f"direction {direction!r}; expected 'lower' or 'higher'")
        self.patience, self.direction = patience, direction
        self.best: float | None = None
        self.best_epoch = -1
        self.epochs = 0
        self.stopped = False
        self._state: dict | None = None

    def update(self, val: float, model: torch.nn.Module) -> bool:
        """Record epoch ``self.epochs``'s validation metric; True when training should stop."""
        epoch, self.epochs = self.epochs, self.epochs + 1
        better = self.best is None or (
            val < self.best if self.direction == "lower" else val > self.best
        )
        if better:
            self.best, self.best_epoch = val, epoch
            if self.patience is not None:
                self._state = copy.deepcopy(model.state_dict())
        self.stopped = self.patience is not None and epoch - self.best_epoch >= self.patience
        return self.stopped

    def restore(self, model: torch.nn.Module) -> None:
        """Load the best epoch's weights (nothing to do without patience: the last model is
        kept)."""
        if self._state is not None:
            model.load_state_dict(self._state)

    def summary(self) -> dict:
        return {
            "patience": self.patience,
            "best_epoch": self.best_epoch,
            "epochs": self.epochs,
            "stopped_early": self.stopped,
            "improving_at_cap": not self.stopped
            and self.best_epoch == self.epochs - 1
            and self.epochs > 1,
        }
