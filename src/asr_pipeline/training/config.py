"""Typed training configuration: nested dataclasses filled from a plain dict by one merge function.

``resolve_config(base, overrides)`` deep-merges ``overrides`` into ``base`` (both nested dicts; dotted
keys such as ``{"optim.epochs": 3}`` are accepted in ``overrides`` for command lines), rejects unknown
keys naming every one of them, checks each value's type, and returns a ``TrainConfig``. The worker saves
the resolved config as ``training_config.json`` in the run dir, next to every checkpoint, and
``load_json`` reads it back, so a run can always be reproduced or its model rebuilt.

Dataclasses are frozen so nothing edits the config after resolution; lists stay lists so the JSON
round trip is exact.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.io.atomic import write_json_atomic
from asr_pipeline.models.registry import (  # torch-free: the specs name their model code by import path
    DEFAULT_ARCHITECTURE,
    check_available,
    check_variant,
    default_input_dim,
)
from asr_pipeline.models.registry import peak_learning_rate as spec_peak_learning_rate
from asr_pipeline.options import ConfigError
from asr_pipeline.training.epoch_schedule import (
    CurriculumConfig,
    EpochSettings,
    ScheduleEntry,
    check_schedule,
)
from asr_pipeline.training.lr_control import NewbobConfig


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    # Feature shard files (io.shards) or raw manifests (io.manifests: JSONL/JSON/TSV/Parquet records or
    # audio folders, featurized on the fly, see data.audio_dataset), read in this order; one kind per split.
    train_manifests: list[str]
    val_manifests: list[str] = field(default_factory=list)  # empty: no validation
    length_index: str | None = None  # Parquet from the index stage; rebuilt in memory when stale or absent
    # A folder caching the length index of the training/validation shards (one file per shard list); a
    # stale or missing one is rebuilt and written there. Used when length_index is unset.
    dataset_index_dir: str | None = None
    # Feature bins F; every shard row must have cols == input_dim. None: the width of model.architecture's
    # frontend (80 fbank bins; 160 for w2v-bert), resolved when the config is (the saved config has it).
    input_dim: int | None = None
    max_train_samples: int | None = None  # keep the first N training examples (after the duration filter)
    max_val_samples: int | None = None
    batch_size: int | None = None  # fixed batches; None: adaptive batches under adaptive_batch_budget
    # What adaptive_batch_budget counts (data.sampler): padded units count batch size * longest example,
    # the others sum the examples' amounts. Must list the same names as data.sampler.BATCH_UNITS.
    adaptive_batch_unit: Literal[
        "samples",
        "frames",
        "padded-frames",
        "feature-values",
        "duration-ms",
        "padded-duration-ms",
        "padded-attention",
    ] = "padded-frames"
    adaptive_batch_budget: int = 20000  # in adaptive_batch_unit; padded frames: batch size * longest T
    # (padded-attention: batch size * longest T squared, the attention scores of a model that keeps the frame rate)
    adaptive_batch_max_samples: int = 64
    max_audio_duration_sec: float | None = None  # longer training examples are dropped and counted
    # Frame labels of the training data (training.alignment: the align stage's Parquet). Set: the model trains
    # with frame-wise cross-entropy on them instead of CTC (a CTC-output architecture of the same frame rate).
    alignment: str | None = None
    # The same for the validation data: a HuBERT pretraining run validates its unit prediction on them.
    val_alignment: str | None = None
    sort_buffer_size: int = 4096  # examples sorted by length together (see data.sampler)
    sort_by_length_desc: bool = False  # longest first within a buffer, batch order kept (data.sampler)
    # Feature shards mixed at once when shuffling (data.sampler, shard windows): each epoch shuffles the
    # shards, then the examples of this many shards at a time, so a rank holds this many decompressed shards
    # (plus one) however large the corpus; 0 or None: one global shuffle, every shard held once read.
    shuffle_window_shards: int | None = 8
    num_workers: int = 0  # DataLoader worker processes per rank (persistent across epochs when > 0)
    prefetch_factor: int | None = None  # batches each worker loads ahead; None: torch's default (2)
    pin_memory: bool | None = None  # page-locked host batches; None: when run.backend is cuda
    spec_time_masks: int = 2
    spec_time_mask_max_frames: int = 40
    spec_freq_masks: int = 2
    spec_freq_mask_max_bins: int = 15
    # Waveform augmentation, raw manifests only (an error with feature shards): a uniform gain in
    # [min, max] dB and Gaussian noise of this standard deviation (waveform in [-1, 1]) per training
    # example, before the features; seeded by (run.seed, epoch, example). Never on validation.
    waveform_gain_min_db: float = 0.0
    waveform_gain_max_db: float = 0.0
    waveform_noise_std: float = 0.0

    def __post_init__(self) -> None:
        _positive(
            self,
            "input_dim",
            "adaptive_batch_budget",
            "adaptive_batch_max_samples",
            "sort_buffer_size",
            "batch_size",
            "max_train_samples",
            "max_val_samples",
            "max_audio_duration_sec",
            "prefetch_factor",
        )
        _non_negative(
            self,
            "shuffle_window_shards",
            "num_workers",
            "spec_time_masks",
            "spec_time_mask_max_frames",
            "spec_freq_masks",
            "spec_freq_mask_max_bins",
            "waveform_noise_std",
        )
        if self.waveform_gain_min_db > self.waveform_gain_max_db:
            raise ValueError(
                f"waveform_gain_min_db={self.waveform_gain_min_db} is above waveform_gain_max_db="
                f"{self.waveform_gain_max_db}; give min <= max (equal values apply a fixed gain)"
            )
        if self.prefetch_factor is not None and self.num_workers == 0:
            raise ValueError(
                f"prefetch_factor={self.prefetch_factor} needs num_workers > 0 (it counts batches each "
                "worker loads ahead); set num_workers or leave prefetch_factor unset"
            )

    @property
    def waveform_augmentation(self) -> bool:
        """True when any waveform augmentation is configured."""
        return (self.waveform_gain_min_db, self.waveform_gain_max_db, self.waveform_noise_std) != (0, 0, 0)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    # One of models.registry's architectures; another is refused here, before torchrun.
    architecture: str = DEFAULT_ARCHITECTURE
    # A named size ("xs", "demo"; "tiny" in tests), checked here too; None: the default sizes.
    variant: str | None = None
    vocab_size: int | None = None  # None: the tokenizer's vocab_size (pieces + blank)
    blank_id: int = 0
    # Size overrides. None: the variant's value, or with no variant the reference trainer's defaults
    # (d_model 256, 16 layers, 4 heads: models.squeezeformer_spec.DEFAULT_*).
    d_model: int | None = None
    num_layers: int | None = None
    num_heads: int | None = None
    dropout: float | None = None
    # Architecture-specific config fields (e.g. Squeezeformer's conv_kernel_size, a Zipformer's per-stack
    # tuples), over the variant's values; checked against the architecture's config dataclass
    # (models.registry.check_options). Configs saved before this key load with none.
    options: dict[str, Any] = field(default_factory=dict)
    # A pretrained model folder (or its config.json) whose config the model is built from, under options
    # and the size fields (W2V-BERT: a Hugging Face Wav2Vec2BertModel/ForCTC dir, --w2v-hf-model-dir);
    # load_pretrained_weights also imports its weights at the start of a run (not on resume).
    pretrained_dir: str | None = None
    load_pretrained_weights: bool = False

    def __post_init__(self) -> None:
        _positive(self, "vocab_size", "d_model", "num_layers", "num_heads")
        _non_negative(self, "blank_id", "dropout")
        check_available(self.architecture)
        check_variant(self.architecture, self.variant)
        if self.options:  # only then import the registry (torch): --help and plain configs stay fast
            from asr_pipeline.models.registry import check_options

            check_options(self.architecture, self.options)
        if self.load_pretrained_weights and self.pretrained_dir is None:
            raise ValueError(
                "load_pretrained_weights (--w2v-hf-load-weights) needs pretrained_dir (--w2v-hf-model-dir): "
                "the folder whose weights to import"
            )


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """AdamW and its learning-rate schedule (``training.schedule``).

    Two schedules, both warmup -> hold -> polynomial decay to ``lr_min``: the epoch schedule (the
    reference recipe: 20 epochs of warmup, 160 of hold, decay over the rest) unless any ``lr_*_steps``
    field is set, which selects the step schedule.
    """

    epochs: int = 500
    learning_rate: float | None = None  # peak; None: the architecture's recipe, see peak_learning_rate
    weight_decay: float = 5e-4
    lr_warmup_epochs: int = 20  # epoch schedule: warmup, interpolated per optimizer step
    lr_hold_epochs: int = 160
    lr_decay_exponent: float = 1.0  # both schedules: 1 decays linearly, 2 quadratically (polynomial)
    lr_warmup_steps: int | None = None  # step schedule, selected when any of these three is set
    lr_hold_steps: int | None = None  # None under the step schedule: 0
    lr_decay_steps: int | None = None  # None: decay over all steps left after warmup and hold
    lr_min: float = 0.0
    gradient_clip_norm: float | None = 5.0  # None: no clipping (the norm is still logged)
    gradient_clip_value: float | None = None  # clip each gradient element to [-v, v]; excludes the norm clip
    gradient_accumulation_steps: int = 1
    ema_decay: float | None = None  # keep an exponential moving average of the weights (training.ema)
    ema_start_step: int = 0  # before this optimizer step the average just copies the weights
    # What sets the rate (training.optimization): "schedule", the warmup-hold-decay above; "newbob", the
    # validation-driven control of training.lr_control (options in ``newbob``) after the schedule's warmup.
    lr_control: Literal["schedule", "newbob"] = "schedule"
    newbob: NewbobConfig = field(default_factory=NewbobConfig)
    # Stop once the validation score (val_cer; val_loss for HuBERT pretraining) has not improved by more than
    # early_stopping_min_delta for this many epochs in a row (training.early_stopping); None: run every epoch.
    early_stopping_patience: int | None = None
    early_stopping_min_delta: float = 0.0

    def __post_init__(self) -> None:
        _positive(
            self,
            "epochs",
            "early_stopping_patience",
            "learning_rate",
            "lr_decay_steps",
            "lr_decay_exponent",
            "gradient_clip_norm",
            "gradient_clip_value",
            "gradient_accumulation_steps",
        )
        _non_negative(
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


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    output_dir: str = "runs/asr"  # the run dir: config, events, checkpoints, metrics
    tokenizer: str | None = None  # SentencePiece .model; needed for vocab inference and text CER/WER
    seed: int = 0
    log_every: int = 10  # optimizer steps between "train" events
    backend: Literal["cpu", "cuda"] = "cpu"
    # CUDA devices (training.distributed.select_device): device_indices lists one GPU per process of a
    # node (local rank i uses cuda:device_indices[i]); without it a single process uses cuda:device_index
    # and several processes use cuda:<local rank>.
    device_index: int = 0
    device_indices: list[int] = field(default_factory=list)
    # f16 and bf16 run the forward pass under torch.autocast (CTC stays float32); f16 also scales the loss
    # with a GradScaler, whose state is checkpointed. Weights and optimizer state stay float32.
    precision: Literal["f32", "bf16", "f16"] = "f32"
    # Whose code runs the models' hot-spot ops (asr_kernels): auto = the Triton kernels on CUDA, the
    # PyTorch references elsewhere; reference or triton force one (triton on a CPU needs TRITON_INTERPRET=1).
    kernels: Literal["auto", "reference", "triton"] = "auto"
    threads_per_rank: int | None = None  # CPU: torch threads per rank; None: max(1, cores // world size)
    checkpoint_every_steps: int | None = None  # extra mid-epoch checkpoints; one is always written per epoch
    # Also keep every checkpoint's weights as checkpoints/step-<step>.safetensors (training.checkpoint), so
    # each can be validated later (HuBERT's recipe picks the best by validation loss this way).
    keep_checkpoints: bool = False
    resume_from: str | None = None  # a run dir whose checkpoint_latest to continue from (training.resume)
    # Start from these weights (a run dir's checkpoint_latest, or a .safetensors file); tensors whose name
    # or shape differ are skipped and reported. Ignored when resume_from is set: the checkpoint wins.
    init_from: str | None = None
    dry_run: bool = False  # forward + loss on the first batch only; no optimizer step, no checkpoint
    tui: bool = False  # rank 0 draws a live table (tui.LiveView) instead of the tqdm progress bar
    # Rank 0 also logs the curves to DVCLive (dvc plots show, dvc exp show). False: events.jsonl and
    # metrics.json only, for machines without dvc (a cluster node, a GPU box) or runs nobody plots.
    dvclive: bool = True
    # Abort once more micro-batches than this (summed over ranks, over the whole run) had a NaN/inf loss.
    # 100: a few broken batches are skipped and survived, while a diverged model fails every batch and
    # stops within 100 / world_size micro-batches instead of burning its budget. None: never abort.
    max_non_finite_losses: int | None = 100
    # Bitwise-reproducible weights (training.determinism): seeded RNGs, deterministic algorithms, cuDNN and
    # cuBLAS settings. Off: the same results up to nondeterministic CUDA kernels.
    deterministic: bool = False
    # Upload every checkpoint to the Hugging Face Hub (publish.hub.CheckpointUploader: rank 0, a background
    # thread, retried, never fatal) as checkpoint-<step>/ of hf_upload_repo_id at hf_upload_revision. The
    # token is huggingface_hub's (HF_TOKEN or its login), never part of the config.
    hf_upload_checkpoints: bool = False
    hf_upload_repo_id: str | None = None
    hf_upload_revision: str = "main"
    hf_upload_private: bool = False  # create the repo private (an existing repo keeps its visibility)
    hf_upload_checkpoint_format: Literal["safetensors"] = "safetensors"

    def __post_init__(self) -> None:
        if self.hf_upload_checkpoints and not self.hf_upload_repo_id:
            raise ValueError(
                "hf_upload_checkpoints needs hf_upload_repo_id (--hf-upload-repo-id namespace/name)"
            )
        _positive(self, "log_every", "threads_per_rank", "checkpoint_every_steps")
        _non_negative(self, "max_non_finite_losses", "device_index")
        if any(index < 0 for index in self.device_indices):
            raise ValueError(f"device_indices must be >= 0, got {self.device_indices}")
        if len(set(self.device_indices)) != len(self.device_indices):
            raise ValueError(
                f"device_indices={self.device_indices} names a GPU twice; give each process its own GPU"
            )
        if self.backend != "cuda" and (self.device_indices or self.device_index != 0):
            raise ValueError(
                f"device_index={self.device_index} / device_indices={self.device_indices} choose CUDA "
                f"devices, but backend is {self.backend!r}: set backend 'cuda' (--backend cuda) or drop them"
            )
        if self.device_indices and self.device_index != 0:
            raise ValueError(
                f"device_index={self.device_index} and device_indices={self.device_indices} are both set; "
                "give one GPU with --device-index or one per process with --device-indices"
            )


@dataclass(frozen=True, kw_only=True)
class ValidationConfig:
    """Scoring the validation manifests: after every epoch, and every ``every_steps`` optimizer steps.

    ``decoding`` is the one decoding options shape (``decoding.options.DecodingOptions``) that `evaluate`
    and ``asr-pipeline decode`` use too: greedy by default; ``decoder: lexicon`` with ``lexicon_path`` and a
    word KenLM in ``lm_path`` decodes as `evaluate` does, so a validation CER predicts the evaluated one.
    """

    every_steps: int | None = None  # extra validations mid-epoch; one always follows every epoch
    decoding: DecodingOptions = field(default_factory=DecodingOptions)
    lm_path: str | None = (
        None  # KenLM fused by the decoder: word LM (lexicon, prefix_beam), piece LM (lexicon_free)
    )
    lexicon_path: str | None = None  # the lexicon decoder's word list (the tokenizer stage's lexicon.txt)
    log_samples: int = 0  # predictions (id, reference, hypothesis[, n-best]) written per validation event

    def __post_init__(self) -> None:
        _positive(self, "every_steps")
        _non_negative(self, "log_samples")
        if self.lm_path is not None and self.decoding.lm_kind is None:
            raise ValueError(
                f"lm_path is set but the {self.decoding.decoder} decoder fuses no LM; set "
                "validation.decoding.decoder (--val-decoder) to lexicon, lexicon_free or prefix_beam"
            )

    @property
    def uses_beam_search(self) -> bool:
        return self.decoding.decoder != "greedy"


@dataclass(frozen=True, kw_only=True)
class GrowConfig:
    """``train.grow``: start with the first ``start_layers`` encoder blocks and add blocks at the start of
    each epoch in ``epochs`` (counting from 1) until the full depth; and/or start at ``start_width`` of the
    model's width and widen at the start of each epoch in ``width_epochs``, by equal steps to the full width
    (training.growth). Depth growth is off when ``start_layers`` is None, widening when ``start_width`` is."""

    start_layers: int | None = None
    epochs: list[int] = field(default_factory=list)  # the epochs that add blocks, increasing
    layers_per_growth: int | None = None  # None: an even share, so the last growth reaches the full depth
    start_width: float | None = None  # the first epochs' width, a fraction of the model's in (0, 1)
    width_epochs: list[int] = field(default_factory=list)  # the epochs that widen, increasing

    def __post_init__(self) -> None:
        if self.start_width is None:
            if self.width_epochs:
                raise ValueError("width_epochs needs start_width (the width fraction to start from)")
        else:
            if not 0.0 < self.start_width < 1.0:
                raise ValueError(
                    f"start_width is a fraction of the model's width in (0, 1), got {self.start_width}"
                )
            _check_growth_epochs("width_epochs", self.width_epochs, f"start_width={self.start_width}")
        if self.start_layers is None:
            if self.epochs or self.layers_per_growth is not None:
                raise ValueError("epochs and layers_per_growth need start_layers (the depth to start from)")
            return
        _positive(self, "start_layers", "layers_per_growth")
        _check_growth_epochs("epochs", self.epochs, f"start_layers={self.start_layers}")

    @property
    def enabled(self) -> bool:
        return self.start_layers is not None or self.start_width is not None


def _check_growth_epochs(name: str, epochs: list[int], start: str) -> None:
    if not epochs or any(epoch < 2 for epoch in epochs) or sorted(set(epochs)) != epochs:
        raise ValueError(
            f"{name} must list the epochs that grow the model, increasing and from 2 on (epoch 1 trains at "
            f"{start}), got {epochs}"
        )


@dataclass(frozen=True, kw_only=True)
class FinetuneConfig:
    """``train.finetune``: how a run adapts the weights it starts from (``run.init_from``, or a Hugging Face
    folder through ``model.pretrained_dir``) to its data (training.finetune).

    ``full`` trains every weight, optionally with the front-end and/or the first ``freeze_layers`` encoder
    blocks frozen for the first ``freeze_epochs`` epochs (None: the whole run). ``lora`` freezes the model and
    trains LoRA adapters on the architecture's attention and feed-forward projections (models.lora); its
    checkpoints hold only the adapters, and ``merge_lora`` writes a plain run dir with them folded in
    (``<output_dir>/merged``) when training ends.
    """

    method: Literal["full", "lora"] = "full"
    freeze_frontend: bool = False
    freeze_layers: int = 0
    freeze_epochs: int | None = None
    lora_rank: int = 8
    lora_alpha: float = 16.0
    lora_dropout: float = 0.0
    lora_target_modules: str | None = None  # a regex over module names; None: the architecture's projections
    merge_lora: bool = False

    def __post_init__(self) -> None:
        _positive(self, "freeze_epochs", "lora_rank", "lora_alpha")
        _non_negative(self, "freeze_layers")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(f"finetune.lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.method == "lora" and (self.freeze_frontend or self.freeze_layers or self.freeze_epochs):
            raise ValueError(
                "finetune.method lora already freezes every base weight; freeze_frontend, freeze_layers and "
                "freeze_epochs apply to method full"
            )
        if self.merge_lora and self.method != "lora":
            raise ValueError(
                "finetune.merge_lora (--merge-lora) needs finetune.method lora (--finetune-method lora)"
            )
        if self.freeze_epochs is not None and not (self.freeze_frontend or self.freeze_layers):
            raise ValueError(
                "finetune.freeze_epochs needs something to freeze: freeze_frontend or freeze_layers"
            )

    @property
    def freezes(self) -> bool:
        return self.freeze_frontend or self.freeze_layers > 0


WEIGHT_NOISE_FAMILY_NAMES = ("linear", "conv", "embedding")  # training.regularization.WEIGHT_NOISE_FAMILIES


@dataclass(frozen=True, kw_only=True)
class RegularizationConfig:
    """``train.regularization``: layer drop and weight noise in training forwards (training.regularization);
    0 turns each off."""

    layer_drop: float = 0.0  # the deepest encoder block's skip probability (every block's under "uniform")
    layer_drop_rule: Literal["linear", "uniform"] = "linear"  # linear: block l of L skips with p * (l+1)/L
    weight_noise_std: float = 0.0  # Gaussian std added to the chosen weights in each training forward
    weight_noise_families: list[str] = field(default_factory=lambda: ["linear", "conv"])

    def __post_init__(self) -> None:
        if not 0.0 <= self.layer_drop < 1.0:
            raise ValueError(f"layer_drop must be in [0, 1), got {self.layer_drop}")
        _non_negative(self, "weight_noise_std")
        unknown = sorted(set(self.weight_noise_families) - set(WEIGHT_NOISE_FAMILY_NAMES))
        if unknown or not self.weight_noise_families:
            raise ValueError(
                f"weight_noise_families must name some of {', '.join(WEIGHT_NOISE_FAMILY_NAMES)}, got "
                f"{self.weight_noise_families}"
            )


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    data: DataConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    # Settings by epoch and short utterances first (training.epoch_schedule).
    schedule: list[ScheduleEntry] = field(default_factory=list)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    # Layer drop and weight noise in training forwards (training.regularization).
    regularization: RegularizationConfig = field(default_factory=RegularizationConfig)
    grow: GrowConfig = field(default_factory=GrowConfig)  # a shallow start, deepened (training.growth)
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)  # full or LoRA (training.finetune)

    def __post_init__(self) -> None:
        if self.optim.lr_control == "newbob" and not self.data.val_manifests:
            raise ValueError(
                "optim.lr_control=newbob (--lr-control newbob) follows the validation score, but there are "
                "no validation manifests: set data.val_manifests (--val-manifests) or use lr_control=schedule"
            )
        if self.data.input_dim is None:  # the architecture's frontend width, written into the saved config
            width = default_input_dim(self.model.architecture)
            object.__setattr__(self, "data", dataclasses.replace(self.data, input_dim=width))
        for name, what in (("epochs", "blocks"), ("width_epochs", "channels")):
            epochs = getattr(self.grow, name)
            if epochs and epochs[-1] > self.optim.epochs:
                raise ValueError(
                    f"grow.{name} reaches epoch {epochs[-1]} but the run has optim.epochs="
                    f"{self.optim.epochs}: the model would be saved with {what} it never trained"
                )
        if self.grow.start_width is not None and (self.model.load_pretrained_weights or self.run.init_from):
            raise ValueError(
                "grow.start_width starts from a narrower model, which cannot take the full-width weights of "
                "model.load_pretrained_weights or run.init_from; drop one of them"
            )
        if self.finetune.freezes and self.grow.enabled:
            raise ValueError(
                "finetune.freeze_frontend/freeze_layers hold trained modules still, and train.grow rebuilds the "
                "model; a fine-tuning run does not grow: drop one of them"
            )
        if self.finetune.method == "lora":
            if not (self.run.init_from or self.model.load_pretrained_weights):
                raise ValueError(
                    "finetune.method lora adapts trained weights: set run.init_from (--init-from, a run dir or "
                    ".safetensors file) or model.pretrained_dir with load_pretrained_weights"
                )
            if self.optim.ema_decay is not None or self.grow.enabled:
                raise ValueError(
                    "finetune.method lora trains adapters on a fixed model: optim.ema_decay and train.grow do not "
                    "apply; unset them"
                )
        if self.schedule:
            check_schedule(self.schedule, _section_keys(TrainConfig))
            EpochSettings(self)  # every epoch's settings must form a valid config, checked now


def _section_keys(cls: type) -> set[str]:
    """Every ``section.field`` of the config (what a dotted key may name)."""
    hints = typing.get_type_hints(cls)
    return {
        f"{name}.{inner.name}"
        for name, section in hints.items()
        if dataclasses.is_dataclass(section)
        for inner in dataclasses.fields(section)
    }


# --- the one merge function ----------------------------------------------------------------------------
def resolve_config(base: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """``base`` deep-merged with ``overrides`` and checked, as a ``TrainConfig``.

    Raises ConfigError (a ValueError, shown as one line) naming every unknown key (with the keys that
    section accepts), every missing required key, the first value of the wrong type, or the first value a
    section refuses.
    """
    merged = deep_merge(_expand_dotted(base), _expand_dotted(overrides or {}))
    unknown = _unknown_keys(TrainConfig, merged, "")
    if unknown:
        raise ConfigError(f"unknown training config keys: {', '.join(unknown)}")
    try:
        return _build(TrainConfig, merged, "")
    except ValueError as error:
        raise ConfigError(str(error)) from error


def to_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def save_json(config: TrainConfig, path: str | Path) -> None:
    """Write atomically (tmp + rename): a reader never sees half a config."""
    write_json_atomic(path, to_dict(config))


def load_json(path: str | Path) -> TrainConfig:
    return resolve_config(upgrade_saved(json.loads(Path(path).read_text())))


# Keys renamed since a config may have been saved: old dotted name -> new. Only saved configs are
# upgraded (load_json, training.resume); params and flags must use the current names.
RENAMED_KEYS = {
    "optim.lr_decay_power": "optim.lr_decay_exponent",
    # the validation decoder's options moved into validation.decoding (decoding.options.DecodingOptions)
    "validation.beam_width": "validation.decoding.beam_width",
    "validation.n_best": "validation.decoding.n_best",
    "validation.lm_weight": "validation.decoding.lm_weight",
    "validation.lm_word_bonus": "validation.decoding.word_score",
    "validation.lm_no_bos": "validation.decoding.lm_no_bos",
    "validation.lm_no_eos": "validation.decoding.lm_no_eos",
}


def upgrade_saved(values: Mapping[str, Any]) -> dict[str, Any]:
    """A saved config dict with renamed keys moved to their current names (a copy)."""
    upgraded = {key: dict(value) if isinstance(value, Mapping) else value for key, value in values.items()}
    for old, new in RENAMED_KEYS.items():
        old_section, old_name = old.split(".")
        section = upgraded.get(old_section)
        if not (isinstance(section, dict) and old_name in section):
            continue
        value = section.pop(old_name)
        *new_sections, new_name = new.split(".")
        target = upgraded
        for name in new_sections:
            target[name] = dict(target.get(name) or {})
            target = target[name]
        target[new_name] = value
    if isinstance(
        upgraded.get("validation"), dict
    ):  # before validation.decoding, beam width > 1 meant prefix beam
        decoding = upgraded["validation"].get("decoding")
        if isinstance(decoding, dict) and "decoder" not in decoding:
            beam = (decoding.get("beam_width") or 1) > 1 or upgraded["validation"].get("lm_path")
            decoding["decoder"] = "prefix_beam" if beam else "greedy"
            if decoding.get("beam_width") is None:
                decoding.pop("beam_width", None)
    return upgraded


def check_vocab_source(config: TrainConfig) -> None:
    """The output layer's size must come from somewhere: ``run.tokenizer`` or ``model.vocab_size``."""
    if config.run.tokenizer is None and config.model.vocab_size is None:
        raise ValueError(
            "the model's output size is unknown: pass --tokenizer MODEL (its pieces + 1 blank; "
            "run.tokenizer) or --vocab-size N (model.vocab_size)"
        )


def peak_learning_rate(config: TrainConfig) -> float:
    """``optim.learning_rate`` when set; else ``default_peak_learning_rate`` of the model."""
    if config.optim.learning_rate is not None:
        return config.optim.learning_rate
    return default_peak_learning_rate(config.model.architecture, config.model.variant)


def default_peak_learning_rate(architecture: str, variant: str | None) -> float:
    """The reference trainer's recipe peak, as the architecture's spec says it
    (``models.registry.peak_learning_rate``; Squeezeformer min(variant peak, 3e-4), 3e-4 with no variant;
    Zipformer and Paraformer 1e-3, W2V-BERT 1e-4)."""
    return spec_peak_learning_rate(check_available(architecture), variant)


# --- helpers -------------------------------------------------------------------------------------------
def _expand_dotted(values: Mapping[str, Any]) -> dict[str, Any]:
    expanded: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            value = _expand_dotted(value)
        head, _, rest = str(key).partition(".")
        if rest:
            value = _expand_dotted({rest: value})
        expanded = deep_merge(expanded, {head: value})
    return expanded


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` over it, nested mappings merged key by key (the config's one merge rule)."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _unknown_keys(cls: type, values: Any, prefix: str) -> list[str]:
    if not isinstance(values, Mapping):
        return []
    hints = typing.get_type_hints(cls)
    unknown = []
    for key, value in values.items():
        if key not in hints:
            accepted = ", ".join(f.name for f in dataclasses.fields(cls))
            unknown.append(f"{prefix}{key} (the {prefix.rstrip('.') or 'top'} section accepts: {accepted})")
        elif dataclasses.is_dataclass(hints[key]):
            unknown.extend(_unknown_keys(hints[key], value, f"{prefix}{key}."))
    return unknown


def _build(cls: type, values: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "the training config"
    if not isinstance(values, Mapping):
        raise ValueError(f"{where} must be a mapping of keys to values, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [f"{prefix}{name}" for name in required if name not in values]
    if missing:
        raise ValueError(f"missing required training config keys: {', '.join(missing)}")
    kwargs = {name: _coerce(hints[name], value, f"{prefix}{name}") for name, value in values.items()}
    try:
        return cls(**kwargs)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _coerce(annotation: Any, value: Any, path: str) -> Any:
    if dataclasses.is_dataclass(annotation):
        return _build(annotation, value, f"{path}.")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(option, value, path)
            except ValueError:
                continue
        raise ValueError(f"{path}: expected {_type_name(annotation)}, got {value!r}")
    if origin is Literal:
        if value not in args:
            raise ValueError(f"{path}: expected one of {list(args)}, got {value!r}")
        return value
    if origin is dict:  # free-form mappings (model.options): the keys are checked where they are used
        if not isinstance(value, Mapping):
            raise ValueError(f"{path}: expected a mapping, got {value!r}")
        return dict(value)
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{path}: expected a list, got {value!r}")
        return [_coerce(args[0], item, f"{path}[{i}]") for i, item in enumerate(value)]
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if annotation is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if annotation is str and isinstance(value, str):
        return value
    raise ValueError(f"{path}: expected {_type_name(annotation)}, got {value!r}")


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _positive(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be > 0, got {value}")


def _non_negative(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is not None and value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")


__all__ = [
    "WEIGHT_NOISE_FAMILY_NAMES",
    "DataConfig",
    "FinetuneConfig",
    "GrowConfig",
    "ModelConfig",
    "OptimConfig",
    "RegularizationConfig",
    "RunConfig",
    "TrainConfig",
    "ValidationConfig",
    "check_vocab_source",
    "deep_merge",
    "default_peak_learning_rate",
    "load_json",
    "peak_learning_rate",
    "resolve_config",
    "save_json",
    "to_dict",
]
