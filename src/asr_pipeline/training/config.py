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
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.io.atomic import write_json_atomic
from asr_pipeline.models.registry import (  # torch-free: the specs name their model code by import path
    DEFAULT_ARCHITECTURE,
    REGISTERED_ARCHITECTURES,
    architecture_names,
    check_available,
    check_variant,
    default_input_dim,
    get_spec,
)
from asr_pipeline.models.registry import peak_learning_rate as spec_peak_learning_rate
from asr_pipeline.options import (
    ConfigError,
    deep_merge,
    expand_dotted,
    from_dict,
    reference_values,
    setting,
    to_dict,
)
from asr_pipeline.training.epoch_schedule import (
    CurriculumConfig,
    EpochSettings,
    ScheduleEntry,
    check_schedule,
    parse_schedule,
)
from asr_pipeline.training.lr_control import NewbobConfig

# What data.adaptive_batch_budget counts; data.sampler.BATCH_UNITS implements each (a test keeps them equal).
BatchUnit = Literal[
    "samples",
    "frames",
    "padded-frames",
    "feature-values",
    "duration-ms",
    "padded-duration-ms",
    "padded-attention",
]


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    train_manifests: list[str] = setting(
        help="Feature shard files (io.shards) or raw manifests (io.manifests: JSONL/JSON/TSV/Parquet records or audio folders, featurized on the fly, see data.audio_dataset), read in this order; one kind per split."
    )
    val_manifests: list[str] = setting(default_factory=list, help="empty: no validation")
    length_index: str | None = setting(
        None, help="Parquet from the index stage; rebuilt in memory when stale or absent"
    )
    # A folder caching the length index of the training/validation shards (one file per shard list); a
    # stale or missing one is rebuilt and written there. Used when length_index is unset.
    dataset_index_dir: str | None = setting(
        None,
        help="cache the shards' length index in this folder: reused while every shard's fingerprint matches, rebuilt and rewritten when one changed",
        flag="--dataset-index-dir",
        metavar="DIR",
    )
    # Feature bins F; every shard row must have cols == input_dim. None: the width of model.architecture's
    # frontend (80 fbank bins; 160 for w2v-bert), resolved when the config is (the saved config has it).
    input_dim: int | None = setting(
        None,
        help="feature bins per frame (the shards' cols)",
        flag="--input-dim",
        shown_default="the architecture's frontend: 80 (fbank), 160 (w2v-bert)",
    )
    max_train_samples: int | None = setting(
        None, help="keep the first N training examples", flag="--max-train-samples"
    )
    max_val_samples: int | None = setting(
        None, help="keep the first N validation examples", flag="--max-val-samples"
    )
    batch_size: int | None = setting(
        None, help="fixed batch size; unset: adaptive batches", flag="--batch-size"
    )
    # What adaptive_batch_budget counts (data.sampler): padded units count batch size * longest example,
    # the others sum the examples' amounts. Must list the same names as data.sampler.BATCH_UNITS.
    adaptive_batch_unit: BatchUnit = setting(
        "padded-frames",
        help="what --adaptive-batch-budget counts: padded-* units count batch size * longest example, the others sum the examples' amounts (feature-values: frames * feature dim; padded-attention: batch size * longest frames squared)",
        flag="--adaptive-batch-unit",
    )
    adaptive_batch_budget: int = setting(
        20000,
        help="most an adaptive batch may cost, in --adaptive-batch-unit; a longer example forms a batch of one, counted in the data event",
        flag="--adaptive-batch-budget",
    )
    # (padded-attention: batch size * longest T squared, the attention scores of a model that keeps the frame rate)
    adaptive_batch_max_samples: int = setting(
        64, help="utterances per adaptive batch at most", flag="--adaptive-batch-max-samples"
    )
    max_audio_duration_sec: float | None = setting(
        None,
        help="drop (and count) longer training examples (validation too with "
        "--max-audio-duration-filters-validation)",
        flag="--max-audio-duration-sec",
        unit="s",
    )
    max_audio_duration_filters_validation: bool = setting(
        False,
        help="--max-audio-duration-sec drops longer validation examples too",
        flag="--max-audio-duration-filters-validation",
        reference=True,
        reference_note="the reference trainer's --max-audio-duration-sec filters validation as well; ours "
        "validates on every example, so a validation score covers the whole split",
    )
    # Frame labels of the training data (training.alignment: the align stage's Parquet). Set: the model trains
    # with frame-wise cross-entropy on them instead of CTC (a CTC-output architecture of the same frame rate).
    alignment: str | None = setting(
        None,
        help="frame labels of the training data (the align stage's Parquet): train with frame-wise cross-entropy on them instead of CTC; for hubert-pretrain, the units it predicts",
        flag="--alignment",
        metavar="PARQUET",
    )
    # The same for the validation data: a HuBERT pretraining run validates its unit prediction on them.
    val_alignment: str | None = setting(
        None,
        help="frame labels of the validation data (hubert-pretrain: the validation utterances' units)",
        flag="--val-alignment",
        metavar="PARQUET",
    )
    sort_buffer_size: int = setting(
        4096, help="examples sorted by length together", flag="--sort-buffer-size"
    )
    sort_by_length_desc: bool = setting(
        False,
        help="sort each buffer longest first and keep that batch order (the largest batch of a buffer runs first, so an out-of-memory batch fails early); unset: shortest first, batches shuffled",
        flag="--sort-by-length-desc",
    )
    # Feature shards mixed at once when shuffling (data.sampler, shard windows): each epoch shuffles the
    # shards, then the examples of this many shards at a time, so a rank holds this many decompressed shards
    # (plus one) however large the corpus; 0 or None: one global shuffle, every shard held once read.
    shuffle_window_shards: int | None = setting(
        8,
        help="feature shards shuffled together: an epoch shuffles the shards, then the examples of N shards at a time, so memory holds N+1 shards whatever the corpus size; 0: one global shuffle",
        flag="--shuffle-window-shards",
    )
    num_workers: int = setting(0, help="DataLoader worker processes per rank", flag="--num-workers")
    prefetch_factor: int | None = setting(
        None,
        help="batches each loader worker prepares ahead (needs --num-workers > 0); unset: torch's 2",
        flag="--prefetch-factor",
    )
    pin_memory: bool | None = setting(
        None,
        help="page-locked host batches for asynchronous copies to the GPU; ignored with a warning without CUDA; unset: on with --backend cuda",
        flag="--pin-memory",
    )
    spec_time_masks: int = setting(
        2,
        help="SpecAugment time masks per example",
        flag="--spec-time-masks",
        reference=0,
        reference_note="SpecAugment is off in the reference trainer; on here: every recipe we measured "
        "generalizes better with it (docs/results/accuracy-per-minute.md)",
    )
    spec_time_mask_max_frames: int = setting(
        40, help="frames per time mask at most", flag="--spec-time-mask-max-frames"
    )
    spec_freq_masks: int = setting(
        2,
        help="SpecAugment frequency masks per example",
        flag="--spec-freq-masks",
        reference=0,
        reference_note="as --spec-time-masks",
    )
    spec_freq_mask_max_bins: int = setting(
        15, help="bins per frequency mask at most", flag="--spec-freq-mask-max-bins"
    )
    # Waveform augmentation, raw manifests only (an error with feature shards): a uniform gain in
    # [min, max] dB and Gaussian noise of this standard deviation (waveform in [-1, 1]) per training
    # example, before the features; seeded by (run.seed, epoch, example). Never on validation.
    waveform_gain_min_db: float = setting(
        0.0,
        help="lowest random gain per training example, in dB (raw audio manifests only)",
        flag="--waveform-gain-min-db",
    )
    waveform_gain_max_db: float = setting(
        0.0,
        help="highest random gain per training example, in dB (raw audio manifests only)",
        flag="--waveform-gain-max-db",
    )
    waveform_noise_std: float = setting(
        0.0,
        help="noise added to training waveforms in [-1, 1] (raw audio only): the standard deviation of Gaussian "
        "noise, or the amplitude of uniform noise with --waveform-noise-kind uniform",
        flag="--waveform-noise-std",
    )
    waveform_noise_kind: Literal["gaussian", "uniform"] = setting(
        "gaussian",
        help="the waveform noise's distribution: gaussian (std --waveform-noise-std) or uniform in "
        "[-std, std] (features.augment.WaveformAugment)",
        flag="--waveform-noise-kind",
        reference="uniform",
        reference_note="the reference trainer reads --waveform-noise-std as a uniform noise's amplitude; ours "
        "as a Gaussian's standard deviation, the usual meaning of std",
    )

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
    architecture: str = setting(
        DEFAULT_ARCHITECTURE,
        help=f"model architecture (models.registry); buildable: {', '.join(architecture_names())}",
        flag="--architecture",
        choices=REGISTERED_ARCHITECTURES,
    )
    # A named size ("xs", "demo"; "tiny" in tests), checked here too; None: the default sizes.
    variant: str | None = setting(
        None,
        help="named size of the architecture: "
        + "; ".join(f"{name} {', '.join(get_spec(name).variants)}" for name in architecture_names())
        + "; unset: squeezeformer takes --d-model, --num-layers, --num-heads, zipformer is M, w2v-bert 600m",
        flag="--variant",
        shown_default="unset",
    )
    vocab_size: int | None = setting(
        None,
        help="output classes incl. blank",
        flag="--vocab-size",
        shown_default="inferred from --tokenizer (pieces + blank)",
    )
    blank_id: int = setting(0, help="CTC blank id (as given to the tokenizer)", flag="--blank-id")
    # Size overrides. None: the variant's value, or with no variant the reference trainer's defaults
    # (d_model 256, 16 layers, 4 heads: models.squeezeformer_spec.DEFAULT_*).
    d_model: int | None = setting(
        None,
        help="model width (squeezeformer, w2v-bert; zipformer's are per stack: --model-option encoder_dim=[...])",
        flag="--d-model",
        shown_default="256 (squeezeformer), w2v-bert 1024; a --variant's own size when given",
    )
    num_layers: int | None = setting(
        None,
        help="encoder blocks",
        flag="--num-layers",
        shown_default="16 (squeezeformer), w2v-bert 24; a --variant's own size when given",
    )
    num_heads: int | None = setting(
        None,
        help="attention heads",
        flag="--num-heads",
        shown_default="4 (squeezeformer), w2v-bert 16; a --variant's own size when given",
    )
    dropout: float | None = setting(
        None, help="dropout probability", flag="--dropout", shown_default="the variant's, or 0.1"
    )
    options: dict[str, Any] = setting(
        default_factory=dict,
        help="Architecture-specific config fields (e.g. Squeezeformer's conv_kernel_size, a Zipformer's per-stack tuples), over the variant's values; checked against the architecture's config dataclass (models.registry.check_options). Configs saved before this key load with none.",
    )
    # A pretrained model folder (or its config.json) whose config the model is built from, under options
    # and the size fields (W2V-BERT: a Hugging Face Wav2Vec2BertModel/ForCTC dir, --w2v-hf-model-dir);
    # load_pretrained_weights also imports its weights at the start of a run (not on resume).
    pretrained_dir: str | None = setting(
        None,
        help="w2v-bert: build the encoder from this Hugging Face Wav2Vec2BertModel (or ForCTC) folder's config.json, or from a config.json path; nothing is downloaded",
        flag="--w2v-hf-model-dir",
        metavar="DIR|config.json",
    )
    load_pretrained_weights: bool = setting(
        False,
        help="w2v-bert: also import the .safetensors weights of --w2v-hf-model-dir at the start (not on resume); prints what was loaded, skipped (with the reason) and left at initialisation",
        flag="--w2v-hf-load-weights",
    )

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
    output_dir: str = setting("runs/asr", help="the run dir: config, events, checkpoints, metrics")
    tokenizer: str | None = setting(
        None, help="SentencePiece .model; needed for vocab inference and text CER/WER"
    )
    seed: int = setting(0, help="random seed", flag="--seed")
    log_every: int = setting(10, help="optimizer steps between train events", flag="--log-every")
    backend: Literal["cpu", "cuda"] = setting("cpu", help="device type", flag="--backend")
    # CUDA devices (training.distributed.select_device): device_indices lists one GPU per process of a
    # node (local rank i uses cuda:device_indices[i]); without it a single process uses cuda:device_index
    # and several processes use cuda:<local rank>.
    device_index: int = setting(
        0,
        help="the CUDA device of a single-process run (cuda:N); several processes without --device-indices use cuda:<local rank>",
        flag="--device-index",
    )
    device_indices: list[int] = setting(
        default_factory=list,
        help="comma-separated CUDA devices, one torchrun process each: local rank i trains on cuda:LIST[i]; --nproc-per-node defaults to their count and must equal it when given",
        flag="--device-indices",
        metavar="LIST",
        shown_default="unset",
    )
    # f16 and bf16 run the forward pass under torch.autocast (CTC stays float32); f16 also scales the loss
    # with a GradScaler, whose state is checkpointed. Weights and optimizer state stay float32.
    precision: Literal["f32", "bf16", "f16"] = setting(
        "f32",
        help="training precision: bf16/f16 autocast the forward pass (f16 with a checkpointed gradient scaler); weights stay float32",
        flag="--precision",
    )
    # Whose code runs the models' hot-spot ops (asr_kernels): auto = the Triton kernels on CUDA, the
    # PyTorch references elsewhere; reference or triton force one (triton on a CPU needs TRITON_INTERPRET=1).
    kernels: Literal["auto", "reference", "triton"] = setting(
        "auto",
        help="the models' hot-spot ops: auto = Triton kernels on CUDA, PyTorch references elsewhere; reference or triton forces one",
        flag="--kernels",
    )
    threads_per_rank: int | None = setting(
        None, help="CPU: torch threads per rank; None: max(1, cores // world size)"
    )
    checkpoint_every_steps: int | None = setting(
        None,
        help="optimizer steps between extra mid-epoch checkpoints; unset: one per epoch only",
        flag="--checkpoint-every-steps",
    )
    # Also keep every checkpoint's weights as checkpoints/step-<step>.safetensors (training.checkpoint), so
    # each can be validated later (HuBERT's recipe picks the best by validation loss this way).
    keep_checkpoints: bool = setting(
        False,
        help="also keep every checkpoint's weights as checkpoints/step-<step>.safetensors in the run dir",
        flag="--keep-checkpoints",
    )
    resume_from: str | None = setting(
        None,
        help="continue the run in this run dir from its checkpoint_latest (the run dir, its checkpoint_latest/ or its checkpoint_latest.json)",
        flag="--resume-from",
        metavar="DIR",
    )
    # Start from these weights (a run dir's checkpoint_latest, or a .safetensors file); tensors whose name
    # or shape differ are skipped and reported. Ignored when resume_from is set: the checkpoint wins.
    init_from: str | None = setting(
        None,
        help="start from a run dir's (or its checkpoint_latest/ or checkpoint_latest.json) or a .safetensors file's weights (matching tensors); ignored with --resume-from",
        flag="--init-from",
        metavar="PATH",
    )
    dry_run: bool = setting(
        False,
        help="forward + loss on the first batch only, to check data, model and device; no step, no checkpoint",
        flag="--dry-run",
    )
    tui: bool = setting(
        False, help="a live table of loss, throughput, LR and validation (rank 0)", flag="--tui"
    )
    # Rank 0 also logs the curves to DVCLive (dvc plots show, dvc exp show). False: events.jsonl and
    # metrics.json only, for machines without dvc (a cluster node, a GPU box) or runs nobody plots.
    dvclive: bool = setting(
        True,
        help="do not log curves to DVCLive (events.jsonl and metrics.json are still written)",
        flag="--no-dvclive",
        const=False,
    )
    # Abort once more micro-batches than this (summed over ranks, over the whole run) had a NaN/inf loss.
    # 100: a few broken batches are skipped and survived, while a diverged model fails every batch and
    # stops within 100 / world_size micro-batches instead of burning its budget. None: never abort.
    max_non_finite_losses: int | None = setting(
        100,
        help="abort once more batches than this had a NaN/inf loss (summed over ranks)",
        flag="--max-non-finite-losses",
    )
    # Bitwise-reproducible weights (training.determinism): seeded RNGs, deterministic algorithms, cuDNN and
    # cuBLAS settings. Off: the same results up to nondeterministic CUDA kernels.
    deterministic: bool = setting(
        False,
        help="bitwise-reproducible weights: seeded RNGs, torch deterministic algorithms, cuDNN/cuBLAS settings (some CUDA kernels run slower)",
        flag="--deterministic",
    )
    # Upload every checkpoint to the Hugging Face Hub (publish.hub.CheckpointUploader: rank 0, a background
    # thread, retried, never fatal) as checkpoint-<step>/ of hf_upload_repo_id at hf_upload_revision. The
    # token is huggingface_hub's (HF_TOKEN or its login), never part of the config.
    hf_upload_checkpoints: bool = setting(
        False,
        help="upload every checkpoint to the Hugging Face Hub (rank 0, in the background, retried, never fatal) as checkpoint-<step>/; the token is HF_TOKEN or huggingface_hub's login",
        flag="--hf-upload-checkpoints",
    )
    hf_upload_repo_id: str | None = setting(
        None, help="the Hub repo (namespace/name)", flag="--hf-upload-repo-id", metavar="ID"
    )
    hf_upload_revision: str = setting(
        "main", help="the branch to commit to", flag="--hf-upload-revision", metavar="REV"
    )
    hf_upload_private: bool = setting(False, help="create the repo private", flag="--hf-upload-private")
    hf_upload_checkpoint_format: Literal["safetensors"] = setting(
        "safetensors",
        help="what a checkpoint is uploaded as: safetensors (the weights, the pointer, the config, the tokenizer)",
        flag="--hf-upload-checkpoint-format",
    )

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

    every_steps: int | None = setting(
        None,
        help="optimizer steps between extra mid-epoch validations; unset: after every epoch only",
        flag="--validate-every-steps",
    )
    decoding: DecodingOptions = setting(
        default_factory=DecodingOptions,
        help="the validation decoder's options (decoding.options), set by the --val-* flags",
        flag_prefix="--val-",
    )
    lm_path: str | None = setting(
        None,
        help="KenLM fused by the validation decoder: word LM (lexicon, prefix_beam) or piece LM (lexicon_free)",
        flag="--val-lm-path",
        metavar="PATH",
    )
    lexicon_path: str | None = setting(
        None,
        help="the lexicon decoder's word list (word<TAB>pieces; the tokenizer stage's lexicon.txt)",
        flag="--val-lexicon",
        metavar="PATH",
    )
    log_samples: int = setting(
        0,
        help="sample predictions (id, reference, hypothesis, n-best) written into each validation event",
        flag="--val-log-samples",
    )

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

    start_layers: int | None = setting(
        None,
        help="start with this many encoder blocks and add the rest at --grow-epochs (a growing network)",
        flag="--grow-start-layers",
    )
    epochs: list[int] = setting(
        default_factory=list,
        help="comma-separated epochs (counting from 1) that add encoder blocks, e.g. 3,5",
        flag="--grow-epochs",
        metavar="EPOCH,...",
    )
    layers_per_growth: int | None = setting(
        None,
        help="blocks each growth adds",
        flag="--grow-layers-per-growth",
        shown_default="an even share reaching the full depth at the last growth",
    )
    start_width: float | None = setting(
        None,
        help="start at this fraction of the model's width (heads and channels) and widen at --grow-width-epochs, copying the trained weights into the wider tensors",
        flag="--grow-start-width",
        metavar="FRACTION",
    )
    width_epochs: list[int] = setting(
        default_factory=list,
        help="comma-separated epochs (counting from 1) that widen the model, by equal steps to the full width",
        flag="--grow-width-epochs",
        metavar="EPOCH,...",
    )

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

    method: Literal["full", "lora"] = setting(
        "full",
        help="how a run started from --init-from (or --w2v-hf-load-weights) trains: every weight (full), or LoRA adapters on the attention and feed-forward projections only (lora; checkpoints hold the adapters)",
        flag="--finetune-method",
    )
    freeze_frontend: bool = setting(
        False,
        help="full fine-tuning: hold the front-end (subsampling / feature projection) still for --freeze-epochs",
        flag="--freeze-frontend",
    )
    freeze_layers: int = setting(
        0,
        help="full fine-tuning: hold the first N encoder blocks still for --freeze-epochs",
        flag="--freeze-layers",
        metavar="N",
    )
    freeze_epochs: int | None = setting(
        None,
        help="epochs the frozen modules stay frozen, then they train too",
        flag="--freeze-epochs",
        shown_default="the whole run",
    )
    lora_rank: int = setting(8, help="LoRA rank r of each adapter (B A, A: r x in)", flag="--lora-rank")
    lora_alpha: float = setting(16.0, help="LoRA scale: the update is (alpha / r) B A", flag="--lora-alpha")
    lora_dropout: float = setting(0.0, help="dropout on the adapters' input", flag="--lora-dropout")
    lora_target_modules: str | None = setting(
        None,
        help="regular expression over module names of the linears to adapt",
        flag="--lora-target-modules",
        metavar="REGEX",
        shown_default="the architecture's attention and feed-forward projections",
    )
    merge_lora: bool = setting(
        False,
        help="when training ends, fold the best checkpoint's adapters into the base weights: a plain run dir in <output-dir>/merged",
        flag="--merge-lora",
    )

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
    schedule: list[ScheduleEntry] = setting(
        default_factory=list,
        help="config values for epoch ranges (counting from 1), ';'-separated, e.g. '1-5:optim.gradient_clip_norm=1.0;3-:model.dropout=0.1' (README, \"Training control\")",
        flag="--schedule",
        parse=parse_schedule,
        metavar="EPOCHS:KEY=VALUE;...",
        shown_default="none",
    )
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    regularization: RegularizationConfig = setting(
        default_factory=RegularizationConfig,
        help="Layer drop and weight noise in training forwards (training.regularization).",
    )
    grow: GrowConfig = setting(default_factory=GrowConfig, help="a shallow start, deepened (training.growth)")
    finetune: FinetuneConfig = setting(
        default_factory=FinetuneConfig, help="full or LoRA (training.finetune)"
    )

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
    merged = deep_merge(expand_dotted(base), expand_dotted(overrides or {}))
    return from_dict(TrainConfig, merged, what="training config")


CLIPS = ("optim.gradient_clip_norm", "optim.gradient_clip_value")


def one_clip(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted ``overrides`` in which a clip given alone turns the other one off.

    The config clips by one of norm or value, and gradient_clip_norm defaults to 5.0, so a user asking for
    a value clip (``--gradient-clip-value``) means "instead of the norm clip". Both given: left as they are,
    for the config's own error. ``resolve_config`` itself applies no such rule: a file must say what it means.
    """
    given = [key for key in CLIPS if overrides.get(key) is not None]
    if len(given) != 1 or any(key in overrides for key in CLIPS if key not in given):
        return dict(overrides)
    (other,) = (key for key in CLIPS if key not in given)
    return {**overrides, other: None}


# --- whose defaults -----------------------------------------------------------------------------------
PROFILES = ("ours", "reference")
DEFAULT_PROFILE = "ours"


def profile_values(profile: str, architecture: str = DEFAULT_ARCHITECTURE) -> dict[str, Any]:
    """Dotted key -> default for every field whose default ``profile`` changes: none for "ours"; for
    "reference", the reference trainer's default of each field that states one (``setting(reference=...)``)
    and of ``architecture``'s options (its spec's ``reference_options``), so a config built on them trains as
    the reference trainer would with the same flags."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown defaults {profile!r}; expected one of {', '.join(PROFILES)}")
    if profile == "ours":
        return {}
    values = reference_values(TrainConfig)
    options = get_spec(check_available(architecture)).reference_options
    values |= {f"model.options.{name}": value for name, (value, _) in options.items()}
    return values


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
    "DEFAULT_PROFILE",
    "PROFILES",
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
    "one_clip",
    "peak_learning_rate",
    "profile_values",
    "resolve_config",
    "save_json",
    "to_dict",
]
