"""``asr-pipeline train``: resolve a training config from a file and flags, then train under torchrun."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

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

# (flag, training config key, type, help, choices); defaults come from training.config, except output_dir.
TRAIN_FLAGS: list[tuple[str, str, Callable[[str], Any], str, list[str] | None]] = [
    ("--architecture", "model.architecture", str, "model architecture (models.registry)", None),
    ("--variant", "model.variant", str, "named size of the architecture, e.g. tiny, demo, xs", None),
    ("--d-model", "model.d_model", int, "model width; overrides the variant's", None),
    ("--num-layers", "model.num_layers", int, "encoder blocks; overrides the variant's", None),
    ("--num-heads", "model.num_heads", int, "attention heads; overrides the variant's", None),
    ("--blank-id", "model.blank_id", int, "CTC blank id (as given to the tokenizer)", None),
    ("--epochs", "optim.epochs", int, "passes over the training data", None),
    ("--learning-rate", "optim.learning_rate", float, "peak learning rate; unset: the variant's", None),
    ("--weight-decay", "optim.weight_decay", float, "AdamW weight decay", None),
    ("--lr-warmup-steps", "optim.lr_warmup_steps", int, "optimizer steps of linear warmup", None),
    ("--batch-size", "data.batch_size", int, "fixed batch size; unset: adaptive batches", None),
    ("--adaptive-batch-budget", "data.adaptive_batch_budget", int, "padded frames per adaptive batch", None),
    ("--seed", "run.seed", int, "random seed", None),
    (
        "--init-from",
        "run.init_from",
        str,
        "start from a run dir's or .safetensors weights (matching tensors)",
        None,
    ),
    ("--log-every", "run.log_every", int, "optimizer steps between train events", None),
    ("--backend", "run.backend", str, "device type", ["cpu", "cuda"]),
    ("--precision", "run.precision", str, "training precision", ["f32", "bf16", "f16"]),
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
    for flag, key, type_, text, choices in TRAIN_FLAGS:
        section, name = key.split(".")
        default = _config_default(_SECTIONS[section], name)
        shown = "" if default is None else f" (default: {default}, or the config file's)"
        parser.add_argument(flag, type=type_, choices=choices, help=text + shown)
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
    for flag, key, *_ in TRAIN_FLAGS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            overrides[key] = value
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
    from asr_pipeline.training.config import save_json
    from asr_pipeline.training.launch import launch_training
    from asr_pipeline.training.run_layout import CONFIG_FILE, METRICS_FILE

    if args.nproc_per_node < 1:
        raise UsageError("--nproc-per-node must be >= 1")
    config, tokenizer_source = train_config_from_args(args)
    run_dir = Path(config.run.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer_source is not None and tokenizer_source.resolve() != Path(config.run.tokenizer).resolve():
        shutil.copyfile(tokenizer_source, config.run.tokenizer)
    config_path = run_dir / CONFIG_FILE
    save_json(config, config_path)
    launch_training(config_path, nproc_per_node=args.nproc_per_node)
    metrics_path = run_dir / METRICS_FILE
    print_json({"run_dir": str(run_dir), **json.loads(metrics_path.read_text())})
    return 0
