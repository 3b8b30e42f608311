"""``asr-pipeline train``: resolve a training config from a file and flags, then train under torchrun."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any, NamedTuple

from asr_pipeline.cli.common import HelpFormatter, UsageError, existing_path, print_json
from asr_pipeline.cli.config_flags import (
    ConfigFlag,
    add_config_flags,
    config_flags,
    dest_of,
    given_overrides,
    parse_assignment,
)
from asr_pipeline.cli.slurm import add_slurm_flags, write_slurm_script
from asr_pipeline.models.registry import (  # torch-free: --help reads the specs' names and sizes
    DEFAULT_ARCHITECTURE,
    architecture_names,
    check_available,
    check_options,
    check_variant,
    get_spec,
)
from asr_pipeline.models.spec import Lazy
from asr_pipeline.options import deep_merge, expand_dotted
from asr_pipeline.training.config import (
    DEFAULT_PROFILE,
    PROFILES,
    TrainConfig,
    one_clip,
    profile_values,
    resolve_config,
)
from asr_pipeline.training.config.model import parse_model_option

# Every config field with a flag (training.config, ``setting(flag=...)``) is an option of ``train``.
CONFIG_FLAGS = config_flags(TrainConfig)
VAL_MANIFEST_ALIASES = ("--validation-manifest", "--valid-manifest", "--validation-set", "--val-set")
DEFAULT_OUTPUT_DIR = "runs/asr"


class Shortcut(NamedTuple):
    """A switch that sets a config key to a value: the architecture switches (``--zipformer``). Given together
    with another flag setting the same key differently it is a usage error, unless it ``yields``
    (``--mixed-precision``, which any ``--precision`` overrides)."""

    flag: str
    key: str
    help: str
    const: Any = True
    yields: bool = False


def architecture_option_flags() -> list[ConfigFlag]:
    """The flags of the architectures' config fields (``setting(flag=...)`` in each spec's config class), keyed
    ``model.options.<field>``, each help naming the architectures it applies to. Two architectures may share
    a flag only for the same field. A spec naming its config class by import path adds none: that would
    import its model code for ``--help``."""
    by_flag: dict[str, tuple[ConfigFlag, list[str]]] = {}
    for name in architecture_names():
        spec = get_spec(name)
        if isinstance(spec.config_class, Lazy):
            continue
        for flag in config_flags(spec.config_type, prefix="model.options."):
            known, names = by_flag.setdefault(flag.flag, (flag, []))
            if known.key != flag.key:
                raise ValueError(f"{flag.flag} sets {known.key} of {names[0]} but {flag.key} of {name}")
            names.append(name)
    return [
        dataclasses.replace(flag, help=f"{', '.join(names)}: {flag.help}") for flag, names in by_flag.values()
    ]


# Architecture options the reference trainer has flags for (--swoosh, --paraformer-alignment-mode, ...).
MODEL_OPTION_FLAGS = architecture_option_flags()
# The aliases table: the reference trainer's flags that are no single config field.
SHORTCUTS: list[Shortcut] = [
    *(
        Shortcut(f"--{name}", "model.architecture", f"shortcut for --architecture {name}", const=name)
        for name in architecture_names()
        if name != DEFAULT_ARCHITECTURE
    ),
    Shortcut(
        "--mixed-precision",
        "run.precision",
        "shortcut for --precision f16; a --precision flag given too wins",
        const="f16",
        yields=True,
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
    parser.add_argument(
        "--defaults",
        choices=PROFILES,
        help="whose defaults fill what neither --config nor a flag sets: ours, or the reference trainer's "
        "(each difference, and the flags whose meaning differs, in docs/reference/defaults.md) "
        f"(default: {DEFAULT_PROFILE})",
    )
    add_config_flags(parser, CONFIG_FLAGS)
    for shortcut in SHORTCUTS:
        parser.add_argument(
            shortcut.flag,
            dest=dest_of(shortcut.flag),
            action="store_const",
            const=shortcut.const,
            help=shortcut.help,
        )
    add_config_flags(parser, MODEL_OPTION_FLAGS)
    parser.add_argument(
        "--set",
        dest="assignments",
        action="append",
        type=parse_assignment,
        metavar="KEY=VALUE",
        help="set any training config key, e.g. --set optim.newbob.decay=0.7 or --set "
        "validation.decoding.beam_threshold=20 (VALUE as YAML); repeat for several; wins over the other flags",
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
    try:
        check_options(architecture or DEFAULT_ARCHITECTURE, options)
    except ValueError as error:
        raise UsageError(f"--model-option: {error}") from None


def parse_model_options(items: list[str]) -> dict[str, Any]:
    """``["conv_kernel_size=15", "conv_use_glu=true"]`` -> ``{"conv_kernel_size": 15, "conv_use_glu": True}``."""
    try:
        return dict(parse_model_option(item) for item in items)
    except ValueError as error:
        raise UsageError(str(error)) from None


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
    # The chosen defaults go under the file and the flags: they fill only what neither sets.
    architecture = overrides.get("model.architecture") or base.get("model", {}).get(
        "architecture", DEFAULT_ARCHITECTURE
    )
    base = deep_merge(expand_dotted(profile_values(args.defaults or DEFAULT_PROFILE, architecture)), base)
    if "model.variant" in overrides:  # refused here as a usage error (exit 2), before anything runs
        try:
            check_variant(architecture, overrides["model.variant"])
        except ValueError as error:
            raise UsageError(f"--variant: {error}") from None
    if args.manifest_dir is not None:
        _use_manifest_dir(args, output_dir=args.output_dir or base.get("run", {}).get("output_dir"))
    overrides = one_clip(overrides)  # a clip flag given alone picks that clip (training.config)
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
    """The config keys the given flags set (``--set`` last, winning); two flags setting one key differently:
    UsageError."""
    given = given_overrides(args, [*CONFIG_FLAGS, *MODEL_OPTION_FLAGS])
    overrides = {key: value for key, (value, _) in given.items()}
    set_by = {key: flag for key, (_, flag) in given.items()}
    for shortcut in sorted(SHORTCUTS, key=lambda shortcut: shortcut.yields):  # after the flags they yield to
        value = getattr(args, dest_of(shortcut.flag))
        if value is None:
            continue
        if shortcut.key not in set_by:
            overrides[shortcut.key], set_by[shortcut.key] = value, shortcut.flag
        elif not shortcut.yields and overrides[shortcut.key] != value:
            raise UsageError(
                f"{set_by[shortcut.key]} and {shortcut.flag} both set {shortcut.key} ({overrides[shortcut.key]!r} "
                f"vs {value!r}); give one of them"
            )
    if "model.architecture" in overrides:  # refused here as a usage error (exit 2), before anything runs
        try:
            check_available(overrides["model.architecture"])
        except ValueError as error:
            raise UsageError(f"{set_by['model.architecture']}: {error}") from None
    for key, value in args.assignments or []:
        overrides[key] = value
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
