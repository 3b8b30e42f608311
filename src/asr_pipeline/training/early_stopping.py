"""Early stopping: end the run once the validation score has stopped improving.

``optim.early_stopping_patience`` epochs in a row without an improvement of more than
``optim.early_stopping_min_delta`` (in the score's own units: CER points, or loss) end training after that
epoch's checkpoint. The score is the architecture's first validation metric (``val_cer``; ``val_loss`` for
HuBERT pretraining), lower being better, from each epoch's closing validation. Rank 0 decides and every rank
follows (the decision is broadcast), so no rank is left waiting in a collective. The state (best score, its
epoch, epochs since) travels in the checkpoint, so a resumed run stops where the uninterrupted one would have.
The best weights are ``checkpoint_best`` (training.run_checkpoints), which the "early_stop" event names.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class EarlyStopping:
    patience: int
    min_delta: float = 0.0
    score_key: str = "val_cer"
    best_score: float = math.inf
    best_epoch: int | None = None
    epochs_without_improvement: int = 0

    def update(self, epoch: int, score: float) -> bool:
        """Record ``epoch``'s score; True when training should stop after this epoch."""
        if score < self.best_score - self.min_delta:
            self.best_score, self.best_epoch, self.epochs_without_improvement = score, epoch, 0
        else:
            self.epochs_without_improvement += 1
        return self.epochs_without_improvement >= self.patience

    def to_event(self, epoch: int) -> dict[str, Any]:
        return {
            "stopped_after_epoch": epoch,
            "score_key": self.score_key,
            "best_epoch": self.best_epoch,
            "best_score": self.best_score,
            "patience": self.patience,
            "min_delta": self.min_delta,
            "reason": f"{self.score_key} did not improve by more than {self.min_delta:g} for "
            f"{self.epochs_without_improvement} epochs (best {self.best_score:.4g} after epoch "
            f"{(self.best_epoch or 0) + 1})",
        }

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if state:
            self.best_score = float(state["best_score"])
            self.best_epoch = state["best_epoch"]
            self.epochs_without_improvement = int(state["epochs_without_improvement"])


__all__ = ["EarlyStopping"]
