"""``train.optim`` and ``train.regularization``: the optimizer, its learning rate, clipping, EMA and early
stopping; layer drop and weight noise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from asr_pipeline.options import setting
from asr_pipeline.training.config.checks import non_negative, positive
from asr_pipeline.training.lr_control import NewbobConfig


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """AdamW and its learning-rate schedule (``training.schedule``).

    Two schedules, both warmup -> hold -> polynomial decay to ``lr_min``: the epoch schedule (the
    reference recipe: 20 epochs of warmup, 160 of hold, decay over the rest) unless any ``lr_*_steps``
    field is set, which selects the step schedule.
    """

    epochs: int = setting(500, help="passes over the training data", flag="--epochs")
    learning_rate: float | None = setting(
        None,
        help="peak AdamW learning rate",
        flag="--learning-rate",
        shown_default="per architecture: squeezeformer min(variant peak, 3e-4), 3e-4 without --variant; zipformer and paraformer 1e-3; w2v-bert 1e-4",
    )
    weight_decay: float = setting(5e-4, help="AdamW weight decay", flag="--weight-decay")
    lr_warmup_epochs: int = setting(
        20,
        help="epoch schedule: epochs of linear warmup, interpolated per optimizer step (a run shorter than warmup + hold scales both to fill half of it)",
        flag="--lr-warmup-epochs",
        aliases=("--warmup-epochs",),
    )
    lr_hold_epochs: int = setting(
        160,
        help="epoch schedule: epochs at the peak after warmup; the remaining epochs decay to --lr-min",
        flag="--lr-hold-epochs",
        aliases=("--hold-epochs",),
    )
    lr_decay_exponent: float = setting(
        1.0,
        help="exponent of the polynomial decay to --lr-min, both schedules (1: linear)",
        flag="--lr-decay-exponent",
        aliases=("--decay-exponent",),
    )
    lr_warmup_steps: int | None = setting(
        None,
        help="step schedule: optimizer steps of linear warmup; any --lr-*-steps flag replaces the epoch schedule by the step schedule (unset ones: 0 warmup, 0 hold, decay over the rest)",
        flag="--lr-warmup-steps",
        shown_default="unset: the epoch schedule",
    )
    lr_hold_steps: int | None = setting(
        None,
        help="step schedule: optimizer steps at the peak after warmup",
        flag="--lr-hold-steps",
        shown_default="unset: 0 under the step schedule",
    )
    lr_decay_steps: int | None = setting(
        None,
        help="step schedule: optimizer steps of decay to --lr-min",
        flag="--lr-decay-steps",
        shown_default="all steps left after warmup and hold",
    )
    lr_min: float = setting(0.0, help="learning rate at the end of the decay", flag="--lr-min")
    # The optimizer and the schedule's shapes (training.optimizers, training.schedule's docstring).
    optimizer: Literal["adamw", "adam", "sgd", "scaled_adam"] = setting(
        "adamw",
        help="adamw (decoupled weight decay), adam (L2 weight decay), sgd (--sgd-momentum, --sgd-nesterov) or scaled_adam (Zipformer's: updates relative to each tensor's size, clipped at --scaled-adam-clipping-scale x the median norm; its --learning-rate is the relative change per step, icefall's recipe 0.045, pair it with --lr-decay-kind eden)",
        flag="--optimizer",
    )
    sgd_momentum: float = setting(0.9, help="sgd: momentum (0: none)", flag="--sgd-momentum")
    sgd_nesterov: bool = setting(False, help="sgd: Nesterov momentum", flag="--sgd-nesterov")
    scaled_adam_clipping_scale: float | None = setting(
        2.0,
        help="scaled_adam: clip a step's gradient norm at this times the median of the recent norms; unset: no clipping (the norm clip --gradient-clip-norm is not applied under scaled_adam)",
        flag="--scaled-adam-clipping-scale",
    )
    scaled_adam_scalar_lr_scale: float = setting(
        0.1,
        help="scaled_adam: the rate of scalars and of each tensor's learned scale, as a share of --learning-rate",
        flag="--scaled-adam-scalar-lr-scale",
    )
    scaled_adam_param_min_rms: float = setting(
        1e-5,
        help="scaled_adam: a tensor's RMS counts as at least this in its update, and its learned scale never shrinks it below",
        flag="--scaled-adam-param-min-rms",
    )
    scaled_adam_param_max_rms: float = setting(
        3.0,
        help="scaled_adam: the learned scale never grows a tensor's RMS past this",
        flag="--scaled-adam-param-max-rms",
    )
    lr_warmup_kind: Literal["linear", "exponential"] = setting(
        "linear",
        help="warmup shape: linear, or exponential (the same factor every step, from 1%% of the peak)",
        flag="--lr-warmup-kind",
    )
    lr_decay_kind: Literal["polynomial", "exponential", "inverse", "eden"] = setting(
        "polynomial",
        help="decay shape after warmup and hold: polynomial (to --lr-min over the decay, exponent --lr-decay-exponent), exponential (geometric to --lr-min, or to 1%% of the peak without one), inverse (peak * (1 + epochs since the decay began) ** -(--lr-decay-exponent); 0.5: inverse square root), or eden (icefall's Zipformer schedule over steps and epochs, --lr-eden-batches, --lr-eden-epochs; the warmup, from half the rate, is the schedule's warmup)",
        flag="--lr-decay-kind",
        reference="inverse",
        reference_note="the reference trainer's --lr-decay-exponent is an inverse epoch decay (peak * (1 + epochs) ** -exponent)",
    )
    lr_eden_batches: float = setting(
        7500.0,
        help="eden: optimizer steps after which the rate falls as steps ** -0.5 (icefall's lr_batches)",
        flag="--lr-eden-batches",
    )
    lr_eden_epochs: float = setting(
        3.5,
        help="eden: epochs after which the rate falls as epochs ** -0.5 (icefall's lr_epochs)",
        flag="--lr-eden-epochs",
    )
    lr_scale_with_batch: int | None = setting(
        None,
        help="scale each step's rate by its batch's utterances (all ranks, all accumulated micro-batches) / N, the reference pronunciation trainer's rule for adaptive batches; unset: no scaling",
        flag="--lr-scale-with-batch",
        metavar="N",
    )
    gradient_clip_norm: float | None = setting(
        5.0,
        reference=None,
        reference_note="the reference trainer does not clip unless asked; a clip at 5.0 keeps one bad batch "
        "from undoing a run (the norm is logged either way)",
        help="clip the global gradient norm to this; excludes --gradient-clip-value",
        flag="--gradient-clip-norm",
    )
    gradient_clip_value: float | None = setting(
        None,
        help="clip each gradient element to [-v, v]; given alone, turns the norm clip off",
        flag="--gradient-clip-value",
    )
    gradient_accumulation_steps: int = setting(
        1, help="batches summed into one optimizer step", flag="--gradient-accumulation-steps"
    )
    ema_decay: float | None = setting(
        None, help="keep an EMA of the weights, e.g. 0.999; unset: none", flag="--ema-decay"
    )
    ema_start_step: int = setting(
        0, help="optimizer step before which the EMA copies", flag="--ema-start-step"
    )
    # icefall's model averaging (training.ema.RunningAverage): the mean of the weights every average_period
    # steps, saved as averaged.safetensors; two saved averages give the mean between them (models.averaging).
    use_averaged_model: bool = setting(
        False,
        help="keep icefall's running average of the weights (the mean of the weights every --average-period optimizer steps since the start), saved beside each checkpoint's weights as averaged.safetensors; two kept averages give the model averaged between them (run.keep_checkpoints)",
        flag="--use-averaged-model",
    )
    average_period: int = setting(
        200,
        help="optimizer steps between the points the running average (--use-averaged-model) takes",
        flag="--average-period",
    )
    # What sets the rate (training.optimization): "schedule", the warmup-hold-decay above; "newbob", the
    # validation-driven control of training.lr_control (options in ``newbob``) after the schedule's warmup.
    lr_control: Literal["schedule", "newbob"] = setting(
        "schedule",
        help="what sets the learning rate: schedule (warmup, hold, decay) or newbob (the validation score decides each epoch's rate, after the schedule's warmup; needs validation manifests)",
        flag="--lr-control",
    )
    newbob: NewbobConfig = field(default_factory=NewbobConfig)
    # Stop once the validation score (val_cer; val_loss for HuBERT pretraining) has not improved by more than
    # early_stopping_min_delta for this many epochs in a row (training.early_stopping); None: run every epoch.
    early_stopping_patience: int | None = setting(
        None,
        help="stop once the validation score (val CER; val loss for HuBERT pretraining) has not improved for N epochs in a row; the best weights are checkpoint_best",
        flag="--early-stopping-patience",
        metavar="N",
    )
    early_stopping_min_delta: float = setting(
        0.0,
        help="an improvement must exceed this (in the score's units, e.g. CER points)",
        flag="--early-stopping-min-delta",
    )

    def __post_init__(self) -> None:
        positive(
            self,
            "epochs",
            "early_stopping_patience",
            "learning_rate",
            "lr_decay_steps",
            "lr_decay_exponent",
            "gradient_clip_norm",
            "gradient_clip_value",
            "gradient_accumulation_steps",
            "scaled_adam_clipping_scale",
            "scaled_adam_scalar_lr_scale",
            "scaled_adam_param_min_rms",
            "lr_eden_batches",
            "lr_eden_epochs",
            "lr_scale_with_batch",
            "average_period",
        )
        if not 0.0 <= self.sgd_momentum < 1.0:
            raise ValueError(f"sgd_momentum must be in [0, 1), got {self.sgd_momentum}")
        if self.sgd_nesterov and self.sgd_momentum == 0.0:
            raise ValueError("sgd_nesterov needs momentum: set sgd_momentum (--sgd-momentum) above 0")
        if self.scaled_adam_param_max_rms <= self.scaled_adam_param_min_rms:
            raise ValueError(
                f"scaled_adam_param_max_rms={self.scaled_adam_param_max_rms} must be above "
                f"scaled_adam_param_min_rms={self.scaled_adam_param_min_rms}"
            )
        non_negative(
            self,
            "weight_decay",
            "lr_warmup_epochs",
            "lr_hold_epochs",
            "lr_warmup_steps",
            "lr_hold_steps",
            "lr_min",
            "ema_start_step",
            "early_stopping_min_delta",
        )
        if self.learning_rate is not None and self.lr_min > self.learning_rate:
            raise ValueError(
                f"lr_min={self.lr_min} is above the peak learning_rate={self.learning_rate}; the decay "
                "would raise the rate: lower lr_min (--lr-min) or raise learning_rate (--learning-rate)"
            )
        if self.ema_decay is not None and not 0.0 < self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in (0, 1), e.g. 0.999, got {self.ema_decay}")
        # Both at once would make the logged grad_norm and the applied update hard to reason about, and
        # gradient_clip_norm has a non-None default, so a silent precedence rule would surprise someone.
        if self.gradient_clip_value is not None and self.gradient_clip_norm is not None:
            raise ValueError(
                f"gradient_clip_value={self.gradient_clip_value} and gradient_clip_norm="
                f"{self.gradient_clip_norm} are both set; clip by one of them: set gradient_clip_norm "
                "to null (None) to clip by value"
            )

    @property
    def uses_step_schedule(self) -> bool:
        """True when any ``lr_*_steps`` field is set: the step schedule replaces the epoch schedule (as
        in the reference trainer, where any step option overrides the epoch options)."""
        return any(v is not None for v in (self.lr_warmup_steps, self.lr_hold_steps, self.lr_decay_steps))


# lhotse's default max_frames_mask_fraction, which CR-CTC's cr_time_mask_ratio multiplies (icefall's train.py)
CR_TIME_FRACTION = 0.15
WEIGHT_NOISE_FAMILY_NAMES = ("linear", "conv", "embedding")  # training.regularization.WEIGHT_NOISE_FAMILIES


@dataclass(frozen=True, kw_only=True)
class RegularizationConfig:
    """``train.regularization``: layer drop and weight noise in training forwards (training.regularization),
    0 turning each off; CR-CTC (training.cr_ctc)."""

    layer_drop: float = setting(
        0.0,
        help="training forwards skip encoder blocks: the deepest block's probability (every block's with --layer-drop-rule uniform)",
        flag="--layer-drop",
    )
    layer_drop_rule: Literal["linear", "uniform"] = setting(
        "linear",
        help="linear: block l of L skips with p*(l+1)/L; uniform: every block with p",
        flag="--layer-drop-rule",
    )
    weight_noise_std: float = setting(
        0.0,
        help="Gaussian noise of this std on the chosen weights in each training forward (not stored)",
        flag="--weight-noise-std",
    )
    weight_noise_families: list[str] = setting(
        default_factory=lambda: ["linear", "conv"],
        help="comma-separated module families --weight-noise-std applies to: linear, conv, embedding",
        flag="--weight-noise-families",
        metavar="FAMILY,...",
        shown_default="linear,conv",
    )
    # Consistency-regularised CTC (Yao et al. 2024; icefall's zipformer --use-cr-ctc): training.cr_ctc.
    cr_ctc: bool = setting(
        False,
        help="CR-CTC: CTC on two differently SpecAugmented views of each batch plus a consistency loss between their frame posteriors (the views are masked in the training step, not by the loader; a step forwards twice the batch, so icefall halves the batch size); CTC models only",
        flag="--cr-ctc",
        aliases=("--use-cr-ctc",),
    )
    cr_loss_scale: float = setting(
        0.2,
        help="CR-CTC: weight of the consistency loss (each view's KL divergence from the other's detached posteriors) beside the CTC loss",
        flag="--cr-loss-scale",
    )
    cr_time_mask_ratio: float = setting(
        2.5,
        help="CR-CTC: the views' time masking is this times the usual: --spec-time-masks x ratio masks, together covering at most 0.15 x ratio of an utterance (icefall's --time-mask-ratio)",
        flag="--cr-time-mask-ratio",
        aliases=("--time-mask-ratio",),
    )
    cr_loss_warmup_steps: int = setting(
        2000,
        help="CR-CTC: optimizer steps over which the consistency loss's weight rises linearly from 0 to --cr-loss-scale (icefall's warm_step)",
        flag="--cr-loss-warmup-steps",
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.layer_drop < 1.0:
            raise ValueError(f"layer_drop must be in [0, 1), got {self.layer_drop}")
        non_negative(self, "weight_noise_std", "cr_loss_scale", "cr_loss_warmup_steps")
        positive(self, "cr_time_mask_ratio")
        if CR_TIME_FRACTION * self.cr_time_mask_ratio > 1.0:
            raise ValueError(
                f"cr_time_mask_ratio={self.cr_time_mask_ratio} would let the time masks cover "
                f"{CR_TIME_FRACTION * self.cr_time_mask_ratio:.2f} of an utterance: keep it at most "
                f"{1 / CR_TIME_FRACTION:.2f}"
            )
        unknown = sorted(set(self.weight_noise_families) - set(WEIGHT_NOISE_FAMILY_NAMES))
        if unknown or not self.weight_noise_families:
            raise ValueError(
                f"weight_noise_families must name some of {', '.join(WEIGHT_NOISE_FAMILY_NAMES)}, got "
                f"{self.weight_noise_families}"
            )
