"""``asr-pipeline train``: resolve a training config from a file and flags, then train under torchrun."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from asr_pipeline.cli.common import HelpFormatter, UsageError, existing_path, print_json, shard_paths
from asr_pipeline.training.config import (
    DataConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    resolve_config,
)

_SECTIONS = {"data": DataConfig, "model": ModelConfig, "optim": OptimConfig, "run": RunConfig}
VAL_MANIFEST_ALIASES = ("--validation-manifest", "--valid-manifest", "--validation-set", "--val-set")
DEFAULT_OUTPUT_DIR = "runs/asr"


class TrainFlag(NamedTuple):
    """One flag that sets one training config field; its default is the field's (training.config)."""

    flag: str  # the reference trainer's name for it
    key: str  # dotted training config key, e.g. "optim.epochs"
    type: Callable[[str], Any]  # bool: a switch that sets the field to True
    help: str
    choices: list[str] | None = None
    metavar: str | None = None


# Every flag has no argparse default (None), so an unset flag never overrides a --config file's value.
TRAIN_FLAGS: list[TrainFlag] = [
    # model
    TrainFlag("--architecture", "model.architecture", str, "model architecture (models.registry)"),
    TrainFlag("--variant", "model.variant", str, "named size of the architecture, e.g. tiny, demo, xs"),
    TrainFlag("--d-model", "model.d_model", int, "model width; overrides the variant's"),
    TrainFlag("--num-layers", "model.num_layers", int, "encoder blocks; overrides the variant's"),
    TrainFlag("--num-heads", "model.num_heads", int, "attention heads; overrides the variant's"),
    TrainFlag("--dropout", "model.dropout", float, "dropout probability; unset: the variant's"),
    TrainFlag("--vocab-size", "model.vocab_size", int, "output classes incl. blank; unset: the tokenizer's"),
    TrainFlag("--blank-id", "model.blank_id", int, "CTC blank id (as given to the tokenizer)"),
    # optim
    TrainFlag("--epochs", "optim.epochs", int, "passes over the training data"),
    TrainFlag("--learning-rate", "optim.learning_rate", float, "peak learning rate; unset: the variant's"),
    TrainFlag("--weight-decay", "optim.weight_decay", float, "AdamW weight decay"),
    TrainFlag("--lr-warmup-steps", "optim.lr_warmup_steps", int, "optimizer steps of linear warmup"),
    TrainFlag("--lr-hold-steps", "optim.lr_hold_steps", int, "optimizer steps at the peak after warmup"),
    TrainFlag(
        "--lr-decay-steps",
        "optim.lr_decay_steps",
        int,
        "optimizer steps of decay to --lr-min; unset: all steps left after warmup and hold",
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
    # data
    TrainFlag("--input-dim", "data.input_dim", int, "feature bins per frame (the shards' cols)"),
    TrainFlag("--batch-size", "data.batch_size", int, "fixed batch size; unset: adaptive batches"),
    TrainFlag(
        "--adaptive-batch-budget", "data.adaptive_batch_budget", int, "padded frames per adaptive batch"
    ),
    TrainFlag(
        "--adaptive-batch-max-samples",
        "data.adaptive_batch_max_samples",
        int,
        "utterances per adaptive batch at most",
    ),
    TrainFlag("--sort-buffer-size", "data.sort_buffer_size", int, "examples sorted by length together"),
    TrainFlag("--max-train-samples", "data.max_train_samples", int, "keep the first N training examples"),
    TrainFlag("--max-val-samples", "data.max_val_samples", int, "keep the first N validation examples"),
    TrainFlag(
        "--max-audio-duration-sec",
        "data.max_audio_duration_sec",
        float,
        "drop (and count) longer training examples",
    ),
    TrainFlag("--num-workers", "data.num_workers", int, "DataLoader worker processes per rank"),
    TrainFlag("--spec-time-masks", "data.spec_time_masks", int, "SpecAugment time masks per example"),
    TrainFlag(
        "--spec-time-mask-max-frames", "data.spec_time_mask_max_frames", int, "frames per time mask at most"
    ),
    TrainFlag("--spec-freq-masks", "data.spec_freq_masks", int, "SpecAugment frequency masks per example"),
    TrainFlag(
        "--spec-freq-mask-max-bins", "data.spec_freq_mask_max_bins", int, "bins per frequency mask at most"
    ),
    # run
    TrainFlag("--seed", "run.seed", int, "random seed"),
    TrainFlag(
        "--resume-from",
        "run.resume_from",
        str,
        "continue the run in this run dir from its checkpoint_latest",
        metavar="DIR",
    ),
    TrainFlag(
        "--init-from",
        "run.init_from",
        str,
        "start from a run dir's or .safetensors weights (matching tensors); ignored with --resume-from",
        metavar="PATH",
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
    TrainFlag("--backend", "run.backend", str, "device type", ["cpu", "cuda"]),
    TrainFlag("--precision", "run.precision", str, "training precision", ["f32", "bf16", "f16"]),
]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        formatter_class=HelpFormatter,
        help="train a CTC model under torchrun",
        description="Resolve a training config (a --config file, flags, or both: flags win), save it as "
        "<output-dir>/training_config.json and run the training worker under torchrun.",
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
        help="a feature shard or a folder of shards; repeat for several (required without --config)",
    )
    parser.add_argument(
        "--val-manifest",
        *VAL_MANIFEST_ALIASES,
        dest="val_manifest",
        action="append",
        metavar="PATH",
        help="a validation shard or folder of shards; repeat for several (default: no validation)",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="MODEL",
        help="SentencePiece .model; copied into the run dir, sets the vocabulary size and scores text",
    )
    parser.add_argument(
        "--output-dir", help=f"the run dir (default: {DEFAULT_OUTPUT_DIR}, or the config file's)"
    )
    for spec in TRAIN_FLAGS:
        section, name = spec.key.split(".")
        default = _config_default(_SECTIONS[section], name)
        # "is", not "in (None, False)": 0 == False, and a default of 0 should still be shown.
        shown = "" if default is None or default is False else f" (default: {default}, or the config file's)"
        if spec.type is bool:  # store_const keeps the default None: an unset switch leaves the file's value
            parser.add_argument(spec.flag, action="store_const", const=True, help=spec.help + shown)
        else:
            parser.add_argument(
                spec.flag, type=spec.type, choices=spec.choices, metavar=spec.metavar, help=spec.help + shown
            )
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        default=1,
        help="training processes on this machine (CPU ranks, or one per GPU)",
    )
    parser.set_defaults(handler=run)


def _config_default(section: type, name: str) -> Any:
    field = {f.name: f for f in dataclasses.fields(section)}[name]
    return None if field.default is dataclasses.MISSING else field.default


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def train_config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, Path | None]:
    """The resolved config (the --config file, then flags) and the tokenizer to copy into the run dir."""
    if args.config:
        try:
            base = json.loads(existing_path(args.config, "--config").read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{args.config}: not a JSON training config ({error})") from None
    else:
        required = {
            "--train-manifest": args.train_manifest,
            "--epochs": args.epochs,
            "--lr-warmup-steps": args.lr_warmup_steps,
        }
        missing = [flag for flag, value in required.items() if value is None]
        if missing:
            raise UsageError(f"without --config, {', '.join(missing)} must be given")
        base = {"run": {"output_dir": DEFAULT_OUTPUT_DIR}}
    overrides: dict[str, Any] = {}
    for spec in TRAIN_FLAGS:
        value = getattr(args, _dest(spec.flag))
        if value is not None:
            overrides[spec.key] = value
    # The config clips by one of norm or value, and gradient_clip_norm defaults to 5.0: a clip flag given
    # alone picks that clip and turns the other off (both given: the config's error, exit 1).
    if args.gradient_clip_value is not None and args.gradient_clip_norm is None:
        overrides["optim.gradient_clip_norm"] = None
    if args.gradient_clip_norm is not None and args.gradient_clip_value is None:
        overrides["optim.gradient_clip_value"] = None
    if args.train_manifest:
        overrides["data.train_manifests"] = shard_paths(args.train_manifest, "--train-manifest")
    if args.val_manifest:
        overrides["data.val_manifests"] = shard_paths(args.val_manifest, "--val-manifest")
    if args.output_dir:
        overrides["run.output_dir"] = args.output_dir
    if args.tokenizer:
        overrides["run.tokenizer"] = args.tokenizer
    config = resolve_config(base, overrides)
    for path in [*config.data.train_manifests, *config.data.val_manifests]:  # the config file's too
        existing_path(path, "training manifest")
    if config.run.tokenizer is None:
        return config, None
    # Like the train stage, keep the tokenizer in the run dir: the run is then self-contained for decoding.
    from asr_pipeline.training.run_layout import TOKENIZER_FILE

    source = existing_path(config.run.tokenizer, "--tokenizer" if args.tokenizer else "run.tokenizer")
    in_run = str(Path(config.run.output_dir) / TOKENIZER_FILE)
    return dataclasses.replace(config, run=dataclasses.replace(config.run, tokenizer=in_run)), source


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.training.launch import run_training

    if args.nproc_per_node < 1:
        raise UsageError("--nproc-per-node must be >= 1")
    config, tokenizer_source = train_config_from_args(args)
    run_dir = Path(config.run.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer_source is not None and tokenizer_source.resolve() != Path(config.run.tokenizer).resolve():
        shutil.copyfile(tokenizer_source, config.run.tokenizer)
    metrics = run_training(config, nproc_per_node=args.nproc_per_node)
    print_json({"run_dir": str(run_dir), **metrics})
    return 0
