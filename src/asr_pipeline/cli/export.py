"""``asr-pipeline export``: a trained run as a self-contained model folder with a model card
(``publish.export``)."""

from __future__ import annotations

import argparse

from asr_pipeline.cli.common import (
    HelpFormatter,
    UsageError,
    add_checkpoint_flag,
    existing_path,
    print_json,
)
from asr_pipeline.run_layout import DEFAULT_WEIGHTS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        formatter_class=HelpFormatter,
        help="write a trained run as a self-contained model folder with a model card",
        description="Write config.json, model.safetensors, tokenizer.model, training_config.json, metrics.json "
        "and a README.md model card (architecture, parameters, data, training, metrics, intended use, "
        "limitations) for --run-dir. The folder loads wherever a run dir does (transcribe, decode) with the same "
        "outputs. A run of the hf_finetune stage (a fine-tuned Whisper or Voxtral) exports as a folder "
        "transformers' from_pretrained loads, LoRA merged (hf_finetune.export).",
    )
    parser.add_argument(
        "--run-dir", required=True, help="a training run dir (or its checkpoint_latest/ or .json)"
    )
    parser.add_argument("--output", required=True, metavar="DIR", help="the folder to write")
    parser.add_argument(
        "--metrics",
        nargs="+",
        default=[],
        metavar="JSON",
        help="the evaluate stage's metrics files (data/metrics/evaluate_<split>.json) for the card's table",
    )
    parser.add_argument("--name", help="the model's name on the card (default: the folder's name)")
    parser.add_argument("--language", help="the card's language tag (ISO 639-1, e.g. en)")
    parser.add_argument("--license", help="the card's license tag (an SPDX id, e.g. apache-2.0)")
    add_checkpoint_flag(parser)
    parser.add_argument(
        "--space",
        metavar="DIR",
        help="an hf_finetune run only: also write a Gradio Space folder around the export (app.py, "
        "requirements.txt, README front matter; `python app.py` in it serves the model locally)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --output folder that holds an earlier export and nothing else (any other "
        "folder, and the run dir or a folder inside or around it, is refused)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.hf_finetune.export import export_finetuned
    from asr_pipeline.models.loading import is_finetuned_run
    from asr_pipeline.publish.export import CardInfo, export_run

    run_dir = existing_path(args.run_dir, "--run-dir")
    if is_finetuned_run(run_dir):
        from asr_pipeline.hf_finetune.space import write_space

        if args.weights != DEFAULT_WEIGHTS:
            raise UsageError(
                f"--weights {args.weights}: {run_dir} is an hf_finetune run, which keeps no weight averages; "
                f"leave --weights out"
            )
        export_finetuned(run_dir, args.output, checkpoint=args.checkpoint, overwrite=args.overwrite)
        space = str(write_space(args.output, args.space)) if args.space else None
        print_json({"output": args.output, "format": "transformers", "space": space})
        return 0
    if args.space:
        raise ValueError(f"--space: {run_dir} is not an hf_finetune run; a Space is written for those only")
    metrics = [existing_path(path, "--metrics") for path in args.metrics]
    card = CardInfo(name=args.name, language=args.language, license=args.license)
    config = export_run(
        run_dir,
        args.output,
        evaluate_metrics=metrics,
        card=card,
        overwrite=args.overwrite,
        checkpoint=args.checkpoint,
        weights=args.weights,
    )
    print_json(
        {"output": args.output, **{k: config[k] for k in ("architecture", "parameters", "vocab_size")}}
    )
    return 0
