"""Validation-driven learning-rate control ("Newbob"), with predefined per-epoch rates and resets.

The rules are RETURNN's (``returnn/learning_rate_control.py``: ``NewbobRelative``, ``NewbobAbs``,
``NewbobMultiEpoch``); ``tests/training/test_lr_control.py`` feeds RETURNN and this module the same scores
and checks the rates agree epoch by epoch. Epochs count from 1 here, as in RETURNN and in the printed
"epoch 1/10" line (the Trainer's 0-based epoch ``e`` is epoch ``e + 1``).

The rate of epoch ``e`` is fixed when ``learning_rate_for_epoch(e)`` is first asked (or ``record(e)``
comes first), from what was recorded before ``e``:

- a predefined rate for ``e`` (``learning_rates[e - 1]``, or ``resets[e]``) wins; later epochs fall back
  to the control, which carries on from the last rate used;
- ``relative``: with ``p`` and ``q`` the last two epochs before ``e`` (``q`` the later one) and ``s`` their
  scores, the change is ``(s_q - s_p) / |s_q|`` (RETURNN's definition: divided by the *new* score; with
  ``relative_error_divides_by="old"``, by ``|s_p|``); negative is better. The rate of ``q`` decays when
  the improvement ``-change`` is below ``threshold``, i.e. ``change > -threshold``, and is kept otherwise;
- ``absolute``: the same with ``change = s_q - s_p``;
- ``multi_epoch``: only at epochs ``e`` with ``e % interval == 1`` (every epoch when the interval, by
  default ``multi_num_epochs``, is 1) the change is the mean of the relative changes between consecutive
  epochs among the last ``multi_num_epochs + 1`` before ``e``; other epochs keep the last rate;
- a decay multiplies by ``decay`` and never goes below ``min_learning_rate``.

Nothing to compare (the first two epochs, an epoch without a recorded score, a score missing its key)
keeps the rate, as in RETURNN. Two choices differ from it, both where RETURNN has no sensible answer:
a division by a zero score gives a change of 0 (equal scores) or +-inf (RETURNN raises
ZeroDivisionError; a CER of exactly 0 is common on small validation sets), and a NaN/inf score counts
as nothing to compare (RETURNN's ``NewbobAbs`` decays on an infinite score, the relative kinds never do).
Rates below ``min_learning_rate`` (predefined, resets, the initial rate) are refused rather than silently
raised to the floor by the next decay, as RETURNN would. RETURNN's rate growth,
``min_num_epochs_per_new_lr`` and ``relative_error_relative_lr`` are not offered.

The control's state is plain values (``state_dict``: each epoch's rate and score), so it is checkpointed
as JSON and a resumed run continues the same schedule.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from asr_pipeline.options import setting

KINDS = ("relative", "absolute", "multi_epoch")
SCORE_KEYS = ("val_loss", "val_cer")
DIVISORS = ("new", "old")
REASONS = ("decayed", "kept", "no_comparison", "between_updates", "predefined")


@dataclass(frozen=True, kw_only=True)
class NewbobConfig:
    """How the rate follows validation (see the module docstring); epochs count from 1 in
    ``learning_rates`` (index 0 is epoch 1) and ``resets``. Decay is limited to (0, 1]: RETURNN's growth
    factors and callables are not offered."""

    kind: Literal["relative", "absolute", "multi_epoch"] = setting(
        "relative",
        help="newbob: compare the last two validations relatively or absolutely, or average the relative changes of the last --newbob-multi-num-epochs (RETURNN's NewbobRelative/Abs/MultiEpoch)",
        flag="--newbob-kind",
    )
    score_key: Literal["val_loss", "val_cer"] = setting(
        "val_loss", help="newbob: the validation score it watches (lower is better)", flag="--newbob-score"
    )
    # The least improvement that keeps the rate: relative (0.01 = 1 %) or absolute (in the score's unit;
    # val_cer is in percent). Note the sign: RETURNN's newbob_*_threshold = -0.01 is threshold 0.01 here.
    threshold: float = setting(
        0.01,
        help="newbob: the least improvement that keeps the rate (relative: 0.01 = 1 %%; absolute: in the score's unit)",
        flag="--newbob-threshold",
    )
    decay: float = setting(0.5, help="newbob: the rate's factor on a stall, in (0, 1]", flag="--newbob-decay")
    min_learning_rate: float = setting(0.0, help="newbob: no decay goes below this", flag="--newbob-min-lr")
    multi_num_epochs: int = setting(
        5,
        help="newbob multi_epoch: validations whose relative changes are averaged",
        flag="--newbob-multi-num-epochs",
    )
    multi_update_interval: int | None = setting(
        None,
        help="newbob multi_epoch: epochs between decisions",
        flag="--newbob-multi-update-interval",
        shown_default="--newbob-multi-num-epochs",
    )
    relative_error_divides_by: Literal["new", "old"] = setting(
        "new",
        help="newbob relative kinds: divide the change by the new score (RETURNN's default) or the old one",
        flag="--newbob-relative-divides-by",
    )
    learning_rates: list[float] = setting(
        default_factory=list,
        help="newbob: the rates of epochs 1, 2, ... (comma-separated); later epochs follow the control",
        flag="--learning-rates",
        metavar="LR,LR,...",
    )
    resets: dict[int, float] = setting(
        default_factory=dict,
        help="newbob: jump back to a rate at given epochs (counting from 1), e.g. 30:1e-3,60:5e-4; added to a --config file's resets",
        flag="--lr-resets",
        metavar="EPOCH:LR,...",
    )

    def __post_init__(self) -> None:
        _one_of(self, "kind", KINDS)
        _one_of(self, "score_key", SCORE_KEYS)
        _one_of(self, "relative_error_divides_by", DIVISORS)
        if not _is_number(self.threshold) or not math.isfinite(self.threshold):
            raise ValueError(f"threshold must be a finite number, e.g. 0.01, got {self.threshold!r}")
        if not _is_number(self.decay) or not 0.0 < self.decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], e.g. 0.5, got {self.decay!r}")
        if not _is_number(self.min_learning_rate) or not 0.0 <= self.min_learning_rate < math.inf:
            raise ValueError(
                f"min_learning_rate must be a finite number >= 0, got {self.min_learning_rate!r}"
            )
        _at_least_one(self, "multi_num_epochs", self.multi_num_epochs)
        if self.multi_update_interval is not None:
            _at_least_one(self, "multi_update_interval", self.multi_update_interval)
        if not isinstance(self.learning_rates, list | tuple):
            raise ValueError(f"learning_rates must be a list of rates, got {self.learning_rates!r}")
        for index, rate in enumerate(self.learning_rates):
            self._check_rate(f"learning_rates[{index}] (epoch {index + 1})", rate)
        object.__setattr__(self, "learning_rates", [float(rate) for rate in self.learning_rates])
        object.__setattr__(self, "resets", self._checked_resets())

    def _checked_resets(self) -> dict[int, float]:
        if not isinstance(self.resets, Mapping):
            raise ValueError(f"resets must map epochs to rates, e.g. {{10: 0.001}}, got {self.resets!r}")
        resets = {}
        for key, rate in self.resets.items():
            # A saved config comes back from JSON with string keys.
            epoch = int(key) if isinstance(key, str) and key.strip().isdigit() else key
            if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
                raise ValueError(f"resets: {key!r} is not an epoch; epochs count from 1")
            if epoch <= len(self.learning_rates):
                raise ValueError(
                    f"resets[{epoch}] falls on an epoch learning_rates already sets (epochs 1-"
                    f"{len(self.learning_rates)}); change learning_rates[{epoch - 1}] instead"
                )
            self._check_rate(f"resets[{epoch}]", rate)
            resets[epoch] = float(rate)
        return resets

    def _check_rate(self, where: str, rate: Any) -> None:
        if not _is_number(rate) or not 0.0 < rate < math.inf:
            raise ValueError(f"{where} must be a finite rate > 0, got {rate!r}")
        if rate < self.min_learning_rate:
            raise ValueError(
                f"{where}={rate} is below min_learning_rate={self.min_learning_rate}; the next decay would "
                "raise it to the floor: raise the rate or lower min_learning_rate"
            )

    @property
    def predefined_rates(self) -> dict[int, float]:
        """Epoch -> rate for every epoch whose rate is given (the list, then the resets)."""
        return {**{i + 1: rate for i, rate in enumerate(self.learning_rates)}, **self.resets}

    @property
    def update_interval(self) -> int:
        """multi_epoch: a decision is taken at epochs 1, 1 + interval, 1 + 2 * interval, ..."""
        return self.multi_update_interval or self.multi_num_epochs


@dataclass(frozen=True)
class Decision:
    """What ``record(epoch, ...)`` decided for epoch ``epoch + 1``, with the scores that decided it."""

    kind: str  # NewbobConfig.kind
    epoch: int  # the validated epoch (counting from 1)
    score_key: str
    scores: dict[int, float]  # epoch -> score compared: the pair, or multi_epoch's window; {} without one
    change: float | None  # relative / absolute / mean relative change; negative is better; None: none
    threshold: float  # decayed when -change < threshold
    old_learning_rate: float  # the rate epoch ``epoch`` trained with
    new_learning_rate: float  # the rate of epoch ``epoch + 1``
    reason: Literal["decayed", "kept", "no_comparison", "between_updates", "predefined"]

    @property
    def decayed(self) -> bool:
        return self.reason == "decayed"

    def to_event(self) -> dict[str, Any]:
        """The values of an ``lr_control`` event (JSON: the score epochs become string keys)."""
        return {
            "kind": self.kind,
            "epoch": self.epoch,
            "next_epoch": self.epoch + 1,
            "score_key": self.score_key,
            "scores": {str(epoch): score for epoch, score in self.scores.items()},
            "change": self.change,
            "threshold": self.threshold,
            "old_learning_rate": self.old_learning_rate,
            "new_learning_rate": self.new_learning_rate,
            "reason": self.reason,
        }


class NewbobControl:
    """The per-epoch learning rate of one run; see the module docstring for the rules."""

    def __init__(self, config: NewbobConfig, initial_learning_rate: float) -> None:
        if not _is_number(initial_learning_rate) or not 0.0 < initial_learning_rate < math.inf:
            raise ValueError(
                f"initial_learning_rate must be a finite rate > 0, got {initial_learning_rate!r}"
            )
        if initial_learning_rate < config.min_learning_rate:
            raise ValueError(
                f"initial_learning_rate={initial_learning_rate} is below min_learning_rate="
                f"{config.min_learning_rate}; lower min_learning_rate or raise the learning rate"
            )
        self.config = config
        self.initial_learning_rate = float(initial_learning_rate)
        self._predefined = config.predefined_rates
        self._rates: dict[int, float] = {}  # epoch -> the rate it trained with, fixed once asked
        self._scores: dict[int, dict[str, float]] = {}  # epoch -> {score_key: score}

    def learning_rate_for_epoch(self, epoch: int) -> float:
        """The rate of ``epoch`` (from 1); fixed on the first call, the same on every later one."""
        _check_epoch(epoch)
        if epoch not in self._rates:
            self._rates[epoch] = self._decide(epoch)[0]
        return self._rates[epoch]

    def record(self, epoch: int, scores: Mapping[str, Any]) -> Decision:
        """Record ``epoch``'s validation scores (``score_key`` must be among them); returns the decision
        for the rate of ``epoch + 1``, which ``learning_rate_for_epoch(epoch + 1)`` will then return."""
        _check_epoch(epoch)
        key = self.config.score_key
        if key not in scores:
            raise ValueError(
                f"the validation scores of epoch {epoch} have no {key!r} (got {sorted(scores)}); Newbob "
                f"watches score_key={key!r}: validate with it or choose one of {list(SCORE_KEYS)}"
            )
        score = scores[key]
        if not _is_number(score):
            raise ValueError(f"the {key!r} of epoch {epoch} must be a number, got {score!r}")
        if self._scores and epoch <= max(self._scores):
            raise ValueError(
                f"epoch {epoch} is not after epoch {max(self._scores)}, the last one recorded; record each "
                "epoch's validation once, in order"
            )
        fixed_later = [e for e in self._rates if e > epoch and e not in self._predefined]
        if fixed_later:
            raise ValueError(
                f"the rate of epoch {min(fixed_later)} was fixed before epoch {epoch}'s validation was "
                f"recorded; call record({epoch}, ...) before learning_rate_for_epoch({epoch + 1})"
            )
        old_rate = self.learning_rate_for_epoch(epoch)
        self._scores[epoch] = {key: float(score)}
        new_rate, change, compared, reason = self._decide(epoch + 1)
        return Decision(
            kind=self.config.kind,
            epoch=epoch,
            score_key=key,
            scores=compared,
            change=change,
            threshold=self.config.threshold,
            old_learning_rate=old_rate,
            new_learning_rate=new_rate,
            reason=reason,
        )

    def state_dict(self) -> dict[str, Any]:
        """Each epoch's rate and recorded score, as JSON-ready plain values."""
        return {
            "epochs": [
                {"epoch": epoch, "learning_rate": rate, "scores": dict(self._scores.get(epoch, {}))}
                for epoch, rate in sorted(self._rates.items())
            ]
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state_dict()``'s values (of this run, or read back from JSON)."""
        if not isinstance(state, Mapping) or not isinstance(state.get("epochs"), list):
            raise ValueError(
                f"Newbob state must be {{'epochs': [...]}} as state_dict() returns, got {state!r}"
            )
        rates, scores = {}, {}
        for index, entry in enumerate(state["epochs"]):
            if not isinstance(entry, Mapping) or not {"epoch", "learning_rate", "scores"} <= set(entry):
                raise ValueError(
                    f"Newbob state epochs[{index}] must be {{'epoch', 'learning_rate', 'scores'}}, got "
                    f"{entry!r}; pass what state_dict() returned"
                )
            epoch = entry["epoch"]
            _check_epoch(epoch)
            rates[epoch] = float(entry["learning_rate"])
            if entry["scores"]:
                scores[epoch] = {str(k): float(v) for k, v in entry["scores"].items()}
        self._rates, self._scores = rates, scores

    # --- the rules --------------------------------------------------------------------------------------
    def _decide(self, epoch: int) -> tuple[float, float | None, dict[int, float], str]:
        """The rate ``epoch`` would get from what is known before it: (rate, change, compared, reason)."""
        if epoch in self._predefined:
            return self._predefined[epoch], None, {}, "predefined"
        before = self._known_epochs_before(epoch)
        rate = self._rates_of(before)[-1] if before else self.initial_learning_rate
        if self.config.kind == "multi_epoch":
            interval = self.config.update_interval
            if interval > 1 and epoch % interval != 1:
                return rate, None, {}, "between_updates"
            window = before[-(self.config.multi_num_epochs + 1) :]
        else:
            window = before[-2:]
        compared = {e: self._score(e) for e in window}
        if len(window) < 2 or any(score is None for score in compared.values()):
            return rate, None, {}, "no_comparison"
        changes = [self._change(compared[a], compared[b]) for a, b in itertools.pairwise(window)]
        change = sum(changes) / len(changes)  # numpy.mean's order for RETURNN's short windows
        if change > -self.config.threshold:
            return max(rate * self.config.decay, self.config.min_learning_rate), change, compared, "decayed"
        return rate, change, compared, "kept"

    def _change(self, old: float, new: float) -> float:
        if self.config.kind == "absolute":
            return new - old
        divisor = abs(new if self.config.relative_error_divides_by == "new" else old)
        if divisor == 0.0:  # RETURNN divides by zero here; equal scores are a stall, others go to +-inf
            return 0.0 if new == old else math.copysign(math.inf, new - old)
        return (new - old) / divisor

    def _known_epochs_before(self, epoch: int) -> list[int]:
        # RETURNN's epoch data: every epoch with a rate, predefined ones included, recorded or not.
        return sorted(e for e in self._rates.keys() | self._predefined.keys() if e < epoch)

    def _rates_of(self, epochs: list[int]) -> list[float]:
        return [self._rates.get(e, self._predefined.get(e)) for e in epochs]

    def _score(self, epoch: int) -> float | None:
        score = self._scores.get(epoch, {}).get(self.config.score_key)
        return score if score is not None and math.isfinite(score) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_epoch(epoch: Any) -> None:
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise ValueError(f"epochs count from 1 (the Trainer's epoch 0 is epoch 1), got {epoch!r}")


def _one_of(config: NewbobConfig, name: str, choices: tuple[str, ...]) -> None:
    if getattr(config, name) not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {getattr(config, name)!r}")


def _at_least_one(config: NewbobConfig, name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


__all__ = ["KINDS", "REASONS", "SCORE_KEYS", "Decision", "NewbobConfig", "NewbobControl"]
