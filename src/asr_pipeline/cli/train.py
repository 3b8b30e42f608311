"""``asr-pipeline train``: resolve a training config from a file and flags, then train under torchrun."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from asr_pipeline.cli.common import HelpFormatter, UsageError, existing_path, print_json
from asr_pipeline.cli.slurm import add_slurm_flags, write_slurm_script
from asr_pipeline.decoding.options import DECODERS
from asr_pipeline.models.registry import (  # torch-free: --help reads the specs' names and sizes
    DEFAULT_ARCHITECTURE,
    REGISTERED_ARCHITECTURES,
    architecture_names,
    check_available,
    check_variant,
    get_spec,
)
from asr_pipeline.models.squeezeformer_spec import DEFAULT_D_MODEL, DEFAULT_NUM_HEADS, DEFAULT_NUM_LAYERS
from asr_pipeline.training.config import (
    DataConfig,
    FinetuneConfig,
    GrowConfig,
    ModelConfig,
    OptimConfig,
    RegularizationConfig,
    RunConfig,
    TrainConfig,
    ValidationConfig,
    resolve_config,
)
from asr_pipeline.training.epoch_schedule import CurriculumConfig

_SECTIONS = {
    "data": DataConfig,
    "model": ModelConfig,
    "optim": OptimConfig,
    "run": RunConfig,
    "validation": ValidationConfig,
    "curriculum": CurriculumConfig,
    "regularization": RegularizationConfig,
    "grow": GrowConfig,
    "finetune": FinetuneConfig,
}
# The adaptive batch units (data.sampler.BATCH_UNITS, which a test keeps equal), from the config without torch.
BATCH_UNIT_NAMES = typing.get_args(typing.get_type_hints(DataConfig)["adaptive_batch_unit"])
VAL_MANIFEST_ALIASES = ("--validation-manifest", "--valid-manifest", "--validation-set", "--val-set")
DEFAULT_OUTPUT_DIR = "runs/asr"


class TrainFlag(NamedTuple):
    """One flag that sets one training config field; its default is the field's (training.config).

    Several flags may set the same field (``--architecture`` and its switches ``--zipformer``, ...): given
    together with different values they are a usage error, unless the later one ``yields`` (a shortcut
    such as ``--mixed-precision``, which any ``--precision`` overrides).
    """

    flag: str  # the reference trainer's name for it
    key: str  # dotted training config key, e.g. "optim.epochs"
    type: Callable[[str], Any]  # bool: a switch that sets the field to ``const`` (True unless given)
    help: str
    choices: list[str] | None = None
    metavar: str | None = None
    aliases: tuple[str, ...] = ()  # other names of the same flag, e.g. --warmup-epochs
    const: Any = None  # switches: the value they set; None: True
    default_help: str | None = None  # the default as --help and the README state it; None: the field's
    yields: bool = False  # a shortcut that another flag setting the same key overrides


def _comma_list(convert: Callable[[str], Any], what: str, example: str) -> Callable[[str], list]:
    """A parser of a comma-separated flag value, e.g. ``_comma_list(int, "epochs", "3,5")``: ``"3,5"`` -> [3, 5]."""

    def parse(text: str) -> list:
        try:
            return [convert(part.strip()) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what} such as {example}, got {text!r}"
            ) from None

    return parse


_index_list = _comma_list(int, "GPU indices", "0,1")  # the reference trainer's --device-indices
_epoch_list = _comma_list(int, "epochs", "3,5")  # --grow-epochs
_rate_list = _comma_list(float, "learning rates", "1e-3,5e-4")  # --learning-rates
_name_list = _comma_list(str, "names", "linear,conv")  # --weight-noise-families


def _schedule_entries(text: str) -> list[dict[str, Any]]:
    """``"1-5:optim.gradient_clip_norm=1.0;3-:model.dropout=0.1"`` -> schedule entries (values as YAML)."""
    import yaml

    entries = []
    for part in (part.strip() for part in text.split(";") if part.strip()):
        epochs, _, assignment = part.partition(":")
        key, equals, value = assignment.partition("=")
        if not (epochs.strip() and key.strip() and equals):
            raise argparse.ArgumentTypeError(
                f"expected EPOCHS:KEY=VALUE entries such as 1-5:optim.gradient_clip_norm=1.0, got {part!r}"
            )
        entries.append({"epochs": epochs.strip(), "values": {key.strip(): yaml.safe_load(value)}})
    return entries


def _rate_resets(text: str) -> dict[int, float]:
    """``"30:1e-3,60:5e-4"`` -> ``{30: 0.001, 60: 0.0005}``: --lr-resets."""
    resets = {}
    for part in (part.strip() for part in text.split(",")):
        epoch, _, rate = part.partition(":")
        try:
            resets[int(epoch)] = float(rate)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected EPOCH:LR pairs such as 30:1e-3,60:5e-4, got {part!r} in {text!r}"
            ) from None
    return resets


# Every flag has no argparse default (None), so an unset flag never overrides a --config file's value.
TRAIN_FLAGS: list[TrainFlag] = [
    # model
    TrainFlag(
        "--architecture",
        "model.architecture",
        str,
        f"model architecture (models.registry); buildable: {', '.join(architecture_names())}",
        REGISTERED_ARCHITECTURES,  # read when parsing: an architecture registered later is accepted
    ),
    *(
        TrainFlag(f"--{name}", "model.architecture", bool, f"shortcut for --architecture {name}", const=name)
        for name in architecture_names()
        if name != DEFAULT_ARCHITECTURE
    ),
    TrainFlag(
        "--variant",
        "model.variant",
        str,
        "named size of the architecture: "
        + "; ".join(f"{name} {', '.join(get_spec(name).variants)}" for name in architecture_names())
        + "; unset: squeezeformer takes --d-model, --num-layers, --num-heads, zipformer is M, w2v-bert 600m",
        default_help="unset",
    ),
    TrainFlag(
        "--d-model",
        "model.d_model",
        int,
        "model width (squeezeformer, w2v-bert; zipformer's are per stack: --model-option encoder_dim=[...])",
        default_help=f"{DEFAULT_D_MODEL} (squeezeformer), w2v-bert 1024; a --variant's own size when given",
    ),
    TrainFlag(
        "--num-layers",
        "model.num_layers",
        int,
        "encoder blocks",
        default_help=f"{DEFAULT_NUM_LAYERS} (squeezeformer), w2v-bert 24; a --variant's own size when given",
    ),
    TrainFlag(
        "--num-heads",
        "model.num_heads",
        int,
        "attention heads",
        default_help=f"{DEFAULT_NUM_HEADS} (squeezeformer), w2v-bert 16; a --variant's own size when given",
    ),
    TrainFlag(
        "--dropout", "model.dropout", float, "dropout probability", default_help="the variant's, or 0.1"
    ),
    TrainFlag(
        "--vocab-size",
        "model.vocab_size",
        int,
        "output classes incl. blank",
        default_help="inferred from --tokenizer (pieces + blank)",
    ),
    TrainFlag("--blank-id", "model.blank_id", int, "CTC blank id (as given to the tokenizer)"),
    TrainFlag(
        "--swoosh",
        "model.options.swoosh",
        str,
        "zipformer's SwooshL/SwooshR activations: 'paper' is the paper's and icefall's "
        "log(1+e^(x-4))-0.08x-0.035 and log(1+e^(x-1))-0.08x-0.313261687; 'sigmoid' is the reference "
        "trainer's kernel-table form x*sigmoid(x-4), x*sigmoid(x-1), a different function",
        ["paper", "sigmoid"],
        default_help="paper",
    ),
    TrainFlag(
        "--paraformer-alignment-mode",
        "model.options.alignment_mode",
        str,
        "paraformer's decoder queries: cif (the CIF predictor's integrated frames), viterbi (the frames CTC "
        "forced alignment gives each token), greedy (the CTC greedy path's segments), uniform (frames split "
        "evenly); the non-cif modes need the CTC head (ctc_weight > 0)",
        ["cif", "viterbi", "greedy", "uniform"],
        default_help="cif",
    ),
    TrainFlag(
        "--paraformer-enhanced",
        "model.options.enhanced",
        bool,
        "paraformer-v2 style: a shallow CTC head on a middle encoder layer, a token-boundary head and a "
        "refinement decoder pass, each with its loss weight (model.options *_weight)",
    ),
    TrainFlag(
        "--w2v-hf-model-dir",
        "model.pretrained_dir",
        str,
        "w2v-bert: build the encoder from this Hugging Face Wav2Vec2BertModel (or ForCTC) folder's "
        "config.json, or from a config.json path; nothing is downloaded",
        metavar="DIR|config.json",
    ),
    TrainFlag(
        "--w2v-hf-load-weights",
        "model.load_pretrained_weights",
        bool,
        "w2v-bert: also import the .safetensors weights of --w2v-hf-model-dir at the start (not on "
        "resume); prints what was loaded, skipped (with the reason) and left at initialisation",
    ),
    TrainFlag(
        "--w2v-activation-checkpointing",
        "model.options.activation_checkpointing",
        bool,
        "w2v-bert: recompute each conformer layer in backward (same gradients, less activation memory)",
    ),
    # optim (AdamW)
    TrainFlag("--epochs", "optim.epochs", int, "passes over the training data"),
    TrainFlag(
        "--learning-rate",
        "optim.learning_rate",
        float,
        "peak AdamW learning rate",
        default_help="per architecture: squeezeformer min(variant peak, 3e-4), 3e-4 without --variant; "
        "zipformer and paraformer 1e-3; w2v-bert 1e-4",
    ),
    TrainFlag("--weight-decay", "optim.weight_decay", float, "AdamW weight decay"),
    TrainFlag(
        "--lr-warmup-epochs",
        "optim.lr_warmup_epochs",
        int,
        "epoch schedule: epochs of linear warmup, interpolated per optimizer step (a run shorter than "
        "warmup + hold scales both to fill half of it)",
        aliases=("--warmup-epochs",),
    ),
    TrainFlag(
        "--lr-hold-epochs",
        "optim.lr_hold_epochs",
        int,
        "epoch schedule: epochs at the peak after warmup; the remaining epochs decay to --lr-min",
        aliases=("--hold-epochs",),
    ),
    TrainFlag(
        "--lr-decay-exponent",
        "optim.lr_decay_exponent",
        float,
        "exponent of the polynomial decay to --lr-min, both schedules (1: linear)",
        aliases=("--decay-exponent",),
    ),
    TrainFlag(
        "--lr-warmup-steps",
        "optim.lr_warmup_steps",
        int,
        "step schedule: optimizer steps of linear warmup; any --lr-*-steps flag replaces the epoch "
        "schedule by the step schedule (unset ones: 0 warmup, 0 hold, decay over the rest)",
        default_help="unset: the epoch schedule",
    ),
    TrainFlag(
        "--lr-hold-steps",
        "optim.lr_hold_steps",
        int,
        "step schedule: optimizer steps at the peak after warmup",
        default_help="unset: 0 under the step schedule",
    ),
    TrainFlag(
        "--lr-decay-steps",
        "optim.lr_decay_steps",
        int,
        "step schedule: optimizer steps of decay to --lr-min",
        default_help="all steps left after warmup and hold",
    ),
    TrainFlag("--lr-min", "optim.lr_min", float, "learning rate at the end of the decay"),
    TrainFlag(
        "--gradient-clip-norm",
        "optim.gradient_clip_norm",
        float,
        "clip the global gradient norm to this; excludes --gradient-clip-value",
    ),
    TrainFlag(
        "--gradient-clip-value",
        "optim.gradient_clip_value",
        float,
        "clip each gradient element to [-v, v]; given alone, turns the norm clip off",
    ),
    TrainFlag(
        "--gradient-accumulation-steps",
        "optim.gradient_accumulation_steps",
        int,
        "batches summed into one optimizer step",
    ),
    TrainFlag("--ema-decay", "optim.ema_decay", float, "keep an EMA of the weights, e.g. 0.999; unset: none"),
    TrainFlag("--ema-start-step", "optim.ema_start_step", int, "optimizer step before which the EMA copies"),
    TrainFlag(
        "--layer-drop",
        "regularization.layer_drop",
        float,
        "training forwards skip encoder blocks: the deepest block's probability (every block's with "
        "--layer-drop-rule uniform)",
    ),
    TrainFlag(
        "--layer-drop-rule",
        "regularization.layer_drop_rule",
        str,
        "linear: block l of L skips with p*(l+1)/L; uniform: every block with p",
        ["linear", "uniform"],
    ),
    TrainFlag(
        "--weight-noise-std",
        "regularization.weight_noise_std",
        float,
        "Gaussian noise of this std on the chosen weights in each training forward (not stored)",
    ),
    TrainFlag(
        "--weight-noise-families",
        "regularization.weight_noise_families",
        _name_list,
        "comma-separated module families --weight-noise-std applies to: linear, conv, embedding",
        metavar="FAMILY,...",
        default_help="linear,conv",
    ),
    TrainFlag(
        "--alignment",
        "data.alignment",
        str,
        "frame labels of the training data (the align stage's Parquet): train with frame-wise "
        "cross-entropy on them instead of CTC; for hubert-pretrain, the units it predicts",
        metavar="PARQUET",
    ),
    TrainFlag(
        "--val-alignment",
        "data.val_alignment",
        str,
        "frame labels of the validation data (hubert-pretrain: the validation utterances' units)",
        metavar="PARQUET",
    ),
    TrainFlag(
        "--grow-start-layers",
        "grow.start_layers",
        int,
        "start with this many encoder blocks and add the rest at --grow-epochs (a growing network)",
    ),
    TrainFlag(
        "--grow-epochs",
        "grow.epochs",
        _epoch_list,
        "comma-separated epochs (counting from 1) that add encoder blocks, e.g. 3,5",
        metavar="EPOCH,...",
    ),
    TrainFlag(
        "--grow-layers-per-growth",
        "grow.layers_per_growth",
        int,
        "blocks each growth adds",
        default_help="an even share reaching the full depth at the last growth",
    ),
    TrainFlag(
        "--grow-start-width",
        "grow.start_width",
        float,
        "start at this fraction of the model's width (heads and channels) and widen at --grow-width-epochs, "
        "copying the trained weights into the wider tensors",
        metavar="FRACTION",
    ),
    TrainFlag(
        "--grow-width-epochs",
        "grow.width_epochs",
        _epoch_list,
        "comma-separated epochs (counting from 1) that widen the model, by equal steps to the full width",
        metavar="EPOCH,...",
    ),
    TrainFlag(
        "--deterministic",
        "run.deterministic",
        bool,
        "bitwise-reproducible weights: seeded RNGs, torch deterministic algorithms, cuDNN/cuBLAS settings "
        "(some CUDA kernels run slower)",
    ),
    TrainFlag(
        "--schedule",
        "schedule",
        _schedule_entries,
        "config values for epoch ranges (counting from 1), ';'-separated, e.g. "
        "'1-5:optim.gradient_clip_norm=1.0;3-:model.dropout=0.1' (README, \"Training control\")",
        metavar="EPOCHS:KEY=VALUE;...",
        default_help="none",
    ),
    TrainFlag(
        "--curriculum-epochs",
        "curriculum.epochs",
        int,
        "the first N epochs batch only short utterances (--curriculum-max-duration-sec or "
        "--curriculum-shortest-fraction)",
    ),
    TrainFlag(
        "--curriculum-max-duration-sec",
        "curriculum.max_duration_sec",
        float,
        "curriculum: short means at most this long",
    ),
    TrainFlag(
        "--curriculum-shortest-fraction",
        "curriculum.shortest_fraction",
        float,
        "curriculum: short means among this fraction of the shortest training utterances",
    ),
    TrainFlag(
        "--curriculum-sort-by-length",
        "curriculum.sort_by_length",
        bool,
        "curriculum epochs run one ascending pass (shortest batches first) instead of a shuffle",
    ),
    TrainFlag(
        "--lr-control",
        "optim.lr_control",
        str,
        "what sets the learning rate: schedule (warmup, hold, decay) or newbob (the validation score "
        "decides each epoch's rate, after the schedule's warmup; needs validation manifests)",
        ["schedule", "newbob"],
    ),
    TrainFlag(
        "--newbob-kind",
        "optim.newbob.kind",
        str,
        "newbob: compare the last two validations relatively or absolutely, or average the relative "
        "changes of the last --newbob-multi-num-epochs (RETURNN's NewbobRelative/Abs/MultiEpoch)",
        ["relative", "absolute", "multi_epoch"],
    ),
    TrainFlag(
        "--newbob-score",
        "optim.newbob.score_key",
        str,
        "newbob: the validation score it watches (lower is better)",
        ["val_loss", "val_cer"],
    ),
    TrainFlag(
        "--newbob-threshold",
        "optim.newbob.threshold",
        float,
        "newbob: the least improvement that keeps the rate (relative: 0.01 = 1 %%; absolute: in the "
        "score's unit)",
    ),
    TrainFlag(
        "--newbob-decay", "optim.newbob.decay", float, "newbob: the rate's factor on a stall, in (0, 1]"
    ),
    TrainFlag("--newbob-min-lr", "optim.newbob.min_learning_rate", float, "newbob: no decay goes below this"),
    TrainFlag(
        "--newbob-multi-num-epochs",
        "optim.newbob.multi_num_epochs",
        int,
        "newbob multi_epoch: validations whose relative changes are averaged",
    ),
    TrainFlag(
        "--newbob-multi-update-interval",
        "optim.newbob.multi_update_interval",
        int,
        "newbob multi_epoch: epochs between decisions",
        default_help="--newbob-multi-num-epochs",
    ),
    TrainFlag(
        "--newbob-relative-divides-by",
        "optim.newbob.relative_error_divides_by",
        str,
        "newbob relative kinds: divide the change by the new score (RETURNN's default) or the old one",
        ["new", "old"],
    ),
    TrainFlag(
        "--learning-rates",
        "optim.newbob.learning_rates",
        _rate_list,
        "newbob: the rates of epochs 1, 2, ... (comma-separated); later epochs follow the control",
        metavar="LR,LR,...",
    ),
    TrainFlag(
        "--lr-resets",
        "optim.newbob.resets",
        _rate_resets,
        "newbob: jump back to a rate at given epochs (counting from 1), e.g. 30:1e-3,60:5e-4; added to a "
        "--config file's resets",
        metavar="EPOCH:LR,...",
    ),
    # data
    TrainFlag(
        "--input-dim",
        "data.input_dim",
        int,
        "feature bins per frame (the shards' cols)",
        default_help="the architecture's frontend: 80 (fbank), 160 (w2v-bert)",
    ),
    TrainFlag("--batch-size", "data.batch_size", int, "fixed batch size; unset: adaptive batches"),
    TrainFlag(
        "--adaptive-batch-unit",
        "data.adaptive_batch_unit",
        str,
        "what --adaptive-batch-budget counts: padded-* units count batch size * longest example, the "
        "others sum the examples' amounts (feature-values: frames * feature dim; padded-attention: batch size "
        "* longest frames squared)",
        list(BATCH_UNIT_NAMES),
    ),
    TrainFlag(
        "--adaptive-batch-budget",
        "data.adaptive_batch_budget",
        int,
        "most an adaptive batch may cost, in --adaptive-batch-unit; a longer example forms a batch of "
        "one, counted in the data event",
    ),
    TrainFlag(
        "--adaptive-batch-max-samples",
        "data.adaptive_batch_max_samples",
        int,
        "utterances per adaptive batch at most",
    ),
    TrainFlag(
        "--dataset-index-dir",
        "data.dataset_index_dir",
        str,
        "cache the shards' length index in this folder: reused while every shard's fingerprint matches, "
        "rebuilt and rewritten when one changed",
        metavar="DIR",
    ),
    TrainFlag("--sort-buffer-size", "data.sort_buffer_size", int, "examples sorted by length together"),
    TrainFlag(
        "--sort-by-length-desc",
        "data.sort_by_length_desc",
        bool,
        "sort each buffer longest first and keep that batch order (the largest batch of a buffer runs "
        "first, so an out-of-memory batch fails early); unset: shortest first, batches shuffled",
    ),
    TrainFlag(
        "--early-stopping-patience",
        "optim.early_stopping_patience",
        int,
        "stop once the validation score (val CER; val loss for HuBERT pretraining) has not improved for N epochs "
        "in a row; the best weights are checkpoint_best",
        metavar="N",
    ),
    TrainFlag(
        "--early-stopping-min-delta",
        "optim.early_stopping_min_delta",
        float,
        "an improvement must exceed this (in the score's units, e.g. CER points)",
    ),
    TrainFlag(
        "--hf-upload-checkpoints",
        "run.hf_upload_checkpoints",
        bool,
        "upload every checkpoint to the Hugging Face Hub (rank 0, in the background, retried, never fatal) as "
        "checkpoint-<step>/; the token is HF_TOKEN or huggingface_hub's login",
    ),
    TrainFlag(
        "--hf-upload-repo-id", "run.hf_upload_repo_id", str, "the Hub repo (namespace/name)", metavar="ID"
    ),
    TrainFlag(
        "--hf-upload-revision", "run.hf_upload_revision", str, "the branch to commit to", metavar="REV"
    ),
    TrainFlag("--hf-upload-private", "run.hf_upload_private", bool, "create the repo private"),
    TrainFlag(
        "--hf-upload-checkpoint-format",
        "run.hf_upload_checkpoint_format",
        str,
        "what a checkpoint is uploaded as: safetensors (the weights, the pointer, the config, the tokenizer)",
        choices=["safetensors"],
    ),
    TrainFlag(
        "--shuffle-window-shards",
        "data.shuffle_window_shards",
        int,
        "feature shards shuffled together: an epoch shuffles the shards, then the examples of N shards at a "
        "time, so memory holds N+1 shards whatever the corpus size; 0: one global shuffle",
    ),
    TrainFlag("--max-train-samples", "data.max_train_samples", int, "keep the first N training examples"),
    TrainFlag("--max-val-samples", "data.max_val_samples", int, "keep the first N validation examples"),
    TrainFlag(
        "--max-audio-duration-sec",
        "data.max_audio_duration_sec",
        float,
        "drop (and count) longer training examples",
    ),
    TrainFlag("--num-workers", "data.num_workers", int, "DataLoader worker processes per rank"),
    TrainFlag(
        "--prefetch-factor",
        "data.prefetch_factor",
        int,
        "batches each loader worker prepares ahead (needs --num-workers > 0); unset: torch's 2",
    ),
    TrainFlag(
        "--pin-memory",
        "data.pin_memory",
        bool,
        "page-locked host batches for asynchronous copies to the GPU; ignored with a warning without "
        "CUDA; unset: on with --backend cuda",
    ),
    TrainFlag("--spec-time-masks", "data.spec_time_masks", int, "SpecAugment time masks per example"),
    TrainFlag(
        "--spec-time-mask-max-frames", "data.spec_time_mask_max_frames", int, "frames per time mask at most"
    ),
    TrainFlag("--spec-freq-masks", "data.spec_freq_masks", int, "SpecAugment frequency masks per example"),
    TrainFlag(
        "--spec-freq-mask-max-bins", "data.spec_freq_mask_max_bins", int, "bins per frequency mask at most"
    ),
    TrainFlag(
        "--waveform-gain-min-db",
        "data.waveform_gain_min_db",
        float,
        "lowest random gain per training example, in dB (raw audio manifests only)",
    ),
    TrainFlag(
        "--waveform-gain-max-db",
        "data.waveform_gain_max_db",
        float,
        "highest random gain per training example, in dB (raw audio manifests only)",
    ),
    TrainFlag(
        "--waveform-noise-std",
        "data.waveform_noise_std",
        float,
        "standard deviation of Gaussian noise added to training waveforms in [-1, 1] (raw audio only)",
    ),
    # run
    TrainFlag("--seed", "run.seed", int, "random seed"),
    TrainFlag(
        "--resume-from",
        "run.resume_from",
        str,
        "continue the run in this run dir from its checkpoint_latest (the run dir, its checkpoint_latest/ "
        "or its checkpoint_latest.json)",
        metavar="DIR",
    ),
    TrainFlag(
        "--init-from",
        "run.init_from",
        str,
        "start from a run dir's (or its checkpoint_latest/ or checkpoint_latest.json) or a .safetensors "
        "file's weights (matching tensors); ignored with --resume-from",
        metavar="PATH",
    ),
    TrainFlag(
        "--finetune-method",
        "finetune.method",
        str,
        "how a run started from --init-from (or --w2v-hf-load-weights) trains: every weight (full), or LoRA "
        "adapters on the attention and feed-forward projections only (lora; checkpoints hold the adapters)",
        choices=["full", "lora"],
    ),
    TrainFlag(
        "--freeze-frontend",
        "finetune.freeze_frontend",
        bool,
        "full fine-tuning: hold the front-end (subsampling / feature projection) still for --freeze-epochs",
    ),
    TrainFlag(
        "--freeze-layers",
        "finetune.freeze_layers",
        int,
        "full fine-tuning: hold the first N encoder blocks still for --freeze-epochs",
        metavar="N",
    ),
    TrainFlag(
        "--freeze-epochs",
        "finetune.freeze_epochs",
        int,
        "epochs the frozen modules stay frozen, then they train too",
        default_help="the whole run",
    ),
    TrainFlag("--lora-rank", "finetune.lora_rank", int, "LoRA rank r of each adapter (B A, A: r x in)"),
    TrainFlag("--lora-alpha", "finetune.lora_alpha", float, "LoRA scale: the update is (alpha / r) B A"),
    TrainFlag("--lora-dropout", "finetune.lora_dropout", float, "dropout on the adapters' input"),
    TrainFlag(
        "--lora-target-modules",
        "finetune.lora_target_modules",
        str,
        "regular expression over module names of the linears to adapt",
        metavar="REGEX",
        default_help="the architecture's attention and feed-forward projections",
    ),
    TrainFlag(
        "--merge-lora",
        "finetune.merge_lora",
        bool,
        "when training ends, fold the best checkpoint's adapters into the base weights: a plain run dir in "
        "<output-dir>/merged",
    ),
    TrainFlag(
        "--dry-run",
        "run.dry_run",
        bool,
        "forward + loss on the first batch only, to check data, model and device; no step, no checkpoint",
    ),
    TrainFlag("--log-every", "run.log_every", int, "optimizer steps between train events"),
    TrainFlag(
        "--checkpoint-every-steps",
        "run.checkpoint_every_steps",
        int,
        "optimizer steps between extra mid-epoch checkpoints; unset: one per epoch only",
    ),
    TrainFlag(
        "--keep-checkpoints",
        "run.keep_checkpoints",
        bool,
        "also keep every checkpoint's weights as checkpoints/step-<step>.safetensors in the run dir",
    ),
    TrainFlag("--backend", "run.backend", str, "device type", ["cpu", "cuda"]),
    TrainFlag(
        "--device-index",
        "run.device_index",
        int,
        "the CUDA device of a single-process run (cuda:N); several processes without --device-indices "
        "use cuda:<local rank>",
    ),
    TrainFlag(
        "--device-indices",
        "run.device_indices",
        _index_list,
        "comma-separated CUDA devices, one torchrun process each: local rank i trains on cuda:LIST[i]; "
        "--nproc-per-node defaults to their count and must equal it when given",
        metavar="LIST",
        default_help="unset",
    ),
    TrainFlag(
        "--precision",
        "run.precision",
        str,
        "training precision: bf16/f16 autocast the forward pass (f16 with a checkpointed gradient "
        "scaler); weights stay float32",
        ["f32", "bf16", "f16"],
    ),
    TrainFlag(
        "--kernels",
        "run.kernels",
        str,
        "the models' hot-spot ops: auto = Triton kernels on CUDA, PyTorch references elsewhere; reference "
        "or triton forces one",
        ["auto", "reference", "triton"],
    ),
    TrainFlag(
        "--mixed-precision",
        "run.precision",
        bool,
        "shortcut for --precision f16; a --precision flag given too wins",
        const="f16",
        yields=True,
    ),
    # validation
    TrainFlag(
        "--validate-every-steps",
        "validation.every_steps",
        int,
        "optimizer steps between extra mid-epoch validations; unset: after every epoch only",
    ),
    TrainFlag(
        "--val-decoder",
        "validation.decoding.decoder",
        str,
        "validation decoder: greedy, lexicon (with --val-lexicon, --val-lm-path), lexicon_free, prefix_beam",
        choices=[name for name in DECODERS if name != "cuda"],
    ),
    TrainFlag("--val-beam-width", "validation.decoding.beam_width", int, "beam width of a beam decoder"),
    TrainFlag(
        "--val-n-best", "validation.decoding.n_best", int, "hypotheses kept per utterance (beam search)"
    ),
    TrainFlag(
        "--val-lm-path",
        "validation.lm_path",
        str,
        "KenLM fused by the validation decoder: word LM (lexicon, prefix_beam) or piece LM (lexicon_free)",
        metavar="PATH",
    ),
    TrainFlag(
        "--val-lexicon",
        "validation.lexicon_path",
        str,
        "the lexicon decoder's word list (word<TAB>pieces; the tokenizer stage's lexicon.txt)",
        metavar="PATH",
    ),
    TrainFlag("--val-lm-weight", "validation.decoding.lm_weight", float, "weight of ln P_LM in the search"),
    TrainFlag(
        "--val-word-score",
        "validation.decoding.word_score",
        float,
        "score added per word (nats; lexicon, prefix_beam)",
        aliases=("--val-lm-word-bonus",),
    ),
    TrainFlag(
        "--val-lm-no-bos",
        "validation.decoding.lm_no_bos",
        bool,
        "prefix_beam: score the first word without <s>",
    ),
    TrainFlag(
        "--val-lm-no-eos", "validation.decoding.lm_no_eos", bool, "prefix_beam: do not score </s> at the end"
    ),
    TrainFlag(
        "--val-log-samples",
        "validation.log_samples",
        int,
        "sample predictions (id, reference, hypothesis, n-best) written into each validation event",
    ),
    # observability
    TrainFlag("--tui", "run.tui", bool, "a live table of loss, throughput, LR and validation (rank 0)"),
    TrainFlag(
        "--no-dvclive",
        "run.dvclive",
        bool,
        "do not log curves to DVCLive (events.jsonl and metrics.json are still written)",
        const=False,
    ),
    TrainFlag(
        "--max-non-finite-losses",
        "run.max_non_finite_losses",
        int,
        "abort once more batches than this had a NaN/inf loss (summed over ranks)",
    ),
]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        formatter_class=HelpFormatter,
        help="train a CTC model under torchrun",
        description="Resolve a training config (a --config file, flags, or both: flags win), save it as "
        "<output-dir>/training_config.json and run the training worker under torchrun. The defaults shown "
        "apply without --config; with it, an unset flag keeps the file's value.",
    )
    parser.add_argument(
        "--config",
        metavar="JSON",
        help="a full training_config.json (as the train stage writes it); flags given too override its values",
    )
    parser.add_argument(
        "--train-manifest",
        action="append",
        metavar="PATH",
        help="a feature shard or a folder of shards, or a raw manifest (JSONL/JSON/TSV/Parquet records "
        "or an audio folder) featurized on the fly; repeat for several, one kind (required without --config)",
    )
    parser.add_argument(
        "--val-manifest",
        *VAL_MANIFEST_ALIASES,
        dest="val_manifest",
        action="append",
        metavar="PATH",
        help="a validation shard, folder of shards or raw manifest; repeat for several (default: no "
        "validation)",
    )
    parser.add_argument(
        "--manifest-dir",
        metavar="DIR",
        help="train on DIR/train.jsonl and validate on the first of DIR/val.jsonl, validation.jsonl, "
        "dev.jsonl; with none of them, a deterministic ~10%% of train.jsonl (by a hash of the record id) is "
        "split off into <output-dir>/manifest_split/ and reused on rerun. Excludes --train-manifest and "
        "--val-manifest",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="MODEL",
        help="SentencePiece .model; copied into the run dir, sets the vocabulary size and scores text",
    )
    parser.add_argument("--output-dir", help=f"the run dir (default: {DEFAULT_OUTPUT_DIR})")
    parser.add_argument(
        "--overwrite-output-dir",
        action="store_const",
        const=True,
        help="start over in an --output-dir that already holds a run: delete that run's files (checkpoints, "
        "events, config, metrics; nothing else) first. Without it such a folder is refused",
    )
    for spec in TRAIN_FLAGS:
        shown = _shown_default(spec)
        help_text = spec.help + ("" if shown is None else f" (default: {shown})")
        names, dest = (spec.flag, *spec.aliases), _dest(spec.flag)
        if spec.type is bool:  # store_const keeps the default None: an unset switch leaves the file's value
            const = True if spec.const is None else spec.const
            parser.add_argument(*names, dest=dest, action="store_const", const=const, help=help_text)
        else:
            parser.add_argument(
                *names, dest=dest, type=spec.type, choices=spec.choices, metavar=spec.metavar, help=help_text
            )
    parser.add_argument(
        "--model-option",
        action="append",
        metavar="NAME=VALUE",
        help="an architecture-specific model config field (model.options), VALUE as JSON (15, 0.1, true, "
        "[2, 4]) or a plain string; repeat for several; the fields are the architecture config's beyond the "
        "common sizes (an unknown one is refused naming the valid ones). Default: the variant's values",
    )
    _add_launch_flags(parser)
    add_slurm_flags(parser)
    parser.set_defaults(handler=run, train_parser=parser)


def _check_model_options(architecture: str | None, options: dict[str, Any]) -> None:
    """Unknown option names are a usage error (exit 2) before anything runs; values are checked when the
    model is built."""
    from asr_pipeline.models.registry import check_options  # imports torch: only when options are given

    try:
        check_options(architecture or _config_default(ModelConfig, "architecture"), options)
    except ValueError as error:
        raise UsageError(f"--model-option: {error}") from None


def parse_model_options(items: list[str]) -> dict[str, Any]:
    """``["conv_kernel_size=15", "conv_use_glu=true"]`` -> ``{"conv_kernel_size": 15, "conv_use_glu": True}``."""
    options: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--model-option {item!r}: expected NAME=VALUE, e.g. conv_kernel_size=15")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text  # a bare string, e.g. input_normalization=utterance
        options[name.strip()] = value
    return options


def _add_launch_flags(parser: argparse.ArgumentParser) -> None:
    """torchrun's options (params.yaml train.launch): where the processes run, not what they train."""
    from asr_pipeline.training.launch import DEFAULT_RDZV_ID, RDZV_BACKENDS

    parser.add_argument(
        "--nproc-per-node",
        type=int,
        help="training processes on this machine: CPU ranks, or one per GPU (default: the number of "
        "--device-indices, else 1)",
    )
    parser.add_argument("--nnodes", type=int, default=1, help="machines in the job (multi-node: > 1)")
    parser.add_argument(
        "--node-rank", type=int, default=0, help="this machine's index in the job, 0 .. --nnodes - 1"
    )
    parser.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        help="multi-node: the rendezvous address on node 0, the same on every node",
    )
    parser.add_argument(
        "--rdzv-id",
        default=DEFAULT_RDZV_ID,
        help="multi-node: job id; jobs sharing an endpoint need their own",
    )
    parser.add_argument(
        "--rdzv-backend",
        choices=RDZV_BACKENDS,
        default="c10d",
        help="multi-node: c10d assigns ranks as nodes join; static fixes them by --node-rank",
    )


def _shown_default(spec: TrainFlag) -> str | None:
    """The default --help and the README state for ``spec``; None when there is none to state."""
    if spec.default_help is not None:
        return spec.default_help
    if spec.type is bool:  # switches are off unless given
        return None
    section, *nested, name = spec.key.split(".")
    owner = _SECTIONS[section]
    for part in nested:  # a nested options dataclass, e.g. validation.decoding
        owner = typing.get_type_hints(owner)[part]
    default = _config_default(owner, name)
    # "is", not "in (None, False)": 0 == False, and a default of 0 should still be shown.
    return None if default is None or default is False else str(default)


def _config_default(section: type, name: str) -> Any:
    field = {f.name: f for f in dataclasses.fields(section)}[name]
    return None if field.default is dataclasses.MISSING else field.default


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _manifest_paths(inputs: list[str], flag: str) -> list[str]:
    """Feature shards (folders expanded to their shards) or raw manifests, one kind (data.sources)."""
    from asr_pipeline.data.sources import resolve_manifests

    for given in inputs:
        existing_path(given, flag)
    try:
        return resolve_manifests(inputs, flag).paths
    except ValueError as error:
        raise UsageError(str(error)) from None


def _check_waveform_augmentation(config: TrainConfig) -> None:
    """Refuse waveform flags on feature shards here, before torchrun starts (training.loaders)."""
    if not config.data.waveform_augmentation:
        return
    from asr_pipeline.data.sources import resolve_manifests
    from asr_pipeline.training.loaders import check_waveform_augmentation

    try:
        check_waveform_augmentation(resolve_manifests(config.data.train_manifests).kind, config.data)
    except ValueError as error:
        raise UsageError(str(error)) from None


def train_config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, Path | None]:
    """The resolved config (the --config file, then flags) and the tokenizer to copy into the run dir."""
    if args.config:
        try:
            base = json.loads(existing_path(args.config, "--config").read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{args.config}: not a JSON training config ({error})") from None
    else:
        if args.train_manifest is None and args.manifest_dir is None:
            raise UsageError("without --config, --train-manifest (or --manifest-dir) must be given")
        base = {"run": {"output_dir": DEFAULT_OUTPUT_DIR}}
    overrides = _flag_overrides(args)
    if "model.variant" in overrides:  # refused here as a usage error (exit 2), before anything runs
        architecture = overrides.get("model.architecture") or base.get("model", {}).get(
            "architecture", _config_default(ModelConfig, "architecture")
        )
        try:
            check_variant(architecture, overrides["model.variant"])
        except ValueError as error:
            raise UsageError(f"--variant: {error}") from None
    if args.manifest_dir is not None:
        _use_manifest_dir(args, output_dir=args.output_dir or base.get("run", {}).get("output_dir"))
    # The config clips by one of norm or value, and gradient_clip_norm defaults to 5.0: a clip flag given
    # alone picks that clip and turns the other off (both given: the config's error, exit 1).
    if args.gradient_clip_value is not None and args.gradient_clip_norm is None:
        overrides["optim.gradient_clip_norm"] = None
    if args.gradient_clip_norm is not None and args.gradient_clip_value is None:
        overrides["optim.gradient_clip_value"] = None
    if args.train_manifest:
        overrides["data.train_manifests"] = _manifest_paths(args.train_manifest, "--train-manifest")
    if args.val_manifest:
        overrides["data.val_manifests"] = _manifest_paths(args.val_manifest, "--val-manifest")
    if args.output_dir:
        overrides["run.output_dir"] = args.output_dir
    if args.tokenizer:
        overrides["run.tokenizer"] = args.tokenizer
    if args.model_option:  # merged over the --config file's options, field by field
        given = parse_model_options(args.model_option)
        _check_model_options(
            overrides.get("model.architecture") or base.get("model", {}).get("architecture"), given
        )
        overrides["model.options"] = {**base.get("model", {}).get("options", {}), **given}
    config = resolve_config(base, overrides)
    for path in [*config.data.train_manifests, *config.data.val_manifests]:  # the config file's too
        existing_path(path, "training manifest")
    _check_waveform_augmentation(config)
    if config.run.tokenizer is None:
        return config, None
    # Like the train stage, keep the tokenizer in the run dir: the run is then self-contained for decoding.
    from asr_pipeline.run_layout import TOKENIZER_FILE

    source = existing_path(config.run.tokenizer, "--tokenizer" if args.tokenizer else "run.tokenizer")
    in_run = str(Path(config.run.output_dir) / TOKENIZER_FILE)
    return dataclasses.replace(config, run=dataclasses.replace(config.run, tokenizer=in_run)), source


def _use_manifest_dir(args: argparse.Namespace, output_dir: str | None) -> None:
    """Point --train-manifest/--val-manifest at DIR's manifests (io.manifest_dir), splitting when needed."""
    from asr_pipeline.io.manifest_dir import resolve_manifest_dir

    if args.train_manifest or args.val_manifest:
        raise UsageError("--manifest-dir excludes --train-manifest and --val-manifest; give one or the other")
    directory = existing_path(args.manifest_dir, "--manifest-dir")
    try:
        split = resolve_manifest_dir(directory, output_dir or DEFAULT_OUTPUT_DIR)
    except FileNotFoundError as error:
        raise UsageError(f"--manifest-dir: {error}") from None
    args.train_manifest = [str(split.train)]
    args.val_manifest = [str(split.val)] if split.val is not None else None


def _flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys the given TRAIN_FLAGS set; two flags setting one key differently: UsageError."""
    overrides: dict[str, Any] = {}
    set_by: dict[str, str] = {}
    for spec in sorted(TRAIN_FLAGS, key=lambda spec: spec.yields):  # shortcuts after the flags they yield to
        value = getattr(args, _dest(spec.flag))
        if value is None:
            continue
        if spec.key not in set_by:
            overrides[spec.key], set_by[spec.key] = value, spec.flag
        elif not spec.yields and overrides[spec.key] != value:
            raise UsageError(
                f"{set_by[spec.key]} and {spec.flag} both set {spec.key} ({overrides[spec.key]!r} vs "
                f"{value!r}); give one of them"
            )
    if "model.architecture" in overrides:  # refused here as a usage error (exit 2), before anything runs
        try:
            check_available(overrides["model.architecture"])
        except ValueError as error:
            raise UsageError(f"{set_by['model.architecture']}: {error}") from None
    return overrides


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.decoding.run_resources import training_decoding_files
    from asr_pipeline.run_layout import TOKENIZER_FILE
    from asr_pipeline.training.launch import check_config, check_devices, resolve_nproc_per_node, run_training
    from asr_pipeline.training.run_dir import check_run_dir

    if args.nproc_per_node is not None and args.nproc_per_node < 1:
        raise UsageError("--nproc-per-node must be >= 1")
    config, tokenizer_source = train_config_from_args(args)
    try:
        nproc_per_node = resolve_nproc_per_node(config, args.nproc_per_node)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if not args.slurm_script:  # a script is rendered on a login node, which may have no GPU
        check_devices(
            config, nproc_per_node
        )  # a CUDA run this machine cannot start: before anything is written
    overwrite = bool(args.overwrite_output_dir)
    try:
        check_config(config)  # no vocabulary size, no checkpoint to resume: one line, before torchrun
        if args.node_rank == 0:  # node 0 prepares a multi-node run's dir; the others find it prepared
            check_run_dir(config, overwrite=overwrite)  # a folder holding another run
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        raise UsageError(str(error)) from None
    if args.slurm_script:
        return write_slurm_script(args, config, nproc_per_node)
    run_dir = Path(config.run.output_dir)
    # The tokenizer is copied in by run_training, under the run dir's lock and after its checks.
    tokenizer = (
        {TOKENIZER_FILE: tokenizer_source.read_bytes()}
        if tokenizer_source is not None and tokenizer_source.resolve() != Path(config.run.tokenizer).resolve()
        else None
    )
    # The lexicon and LM the run is decoded with, known now, travel with it too (decoding.run_resources).
    validation = config.validation
    decoding = training_decoding_files(
        tokenizer_source, validation.lexicon_path, validation.lm_path, validation.decoding.lm_kind
    )
    metrics = run_training(
        config,
        overwrite=overwrite,
        run_files={**(tokenizer or {}), **decoding} or None,
        nproc_per_node=nproc_per_node,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_id=args.rdzv_id,
        rdzv_backend=args.rdzv_backend,
    )
    print_json({"run_dir": str(run_dir), **metrics})
    return 0
