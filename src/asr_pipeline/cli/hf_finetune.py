"""``asr-pipeline hf-finetune``: fine-tune a pretrained Whisper or Voxtral model outside DVC, as one
``hf_finetune@<name>`` stage does (``hf_finetune.stage.run_entry``). Its training flags are generated from
``hf_finetune.options.HFFinetuneOptions``' fields."""

from __future__ import annotations

import argparse
from pathlib import Path

from asr_pipeline.cli.common import HelpFormatter, print_json
from asr_pipeline.cli.config_flags import add_config_flags, config_flags, given_overrides
from asr_pipeline.hf_finetune.options import HFFinetuneOptions

FLAGS = config_flags(HFFinetuneOptions)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "hf-finetune",
        formatter_class=HelpFormatter,
        help="fine-tune a pretrained Whisper or Voxtral model (full or LoRA), scored before and after",
        description="Featurize --train, --val and the --evaluate manifests with the model's feature extractor "
        "(cached in OUTPUT_DIR/features), score the base model, train, score the best checkpoint and export a "
        "from_pretrained folder to OUTPUT_DIR/export; WER/CER before and after in OUTPUT_DIR/metrics.json.",
    )
    parser.add_argument(
        "--train", required=True, metavar="MANIFEST", help="training data (any manifest form)"
    )
    parser.add_argument(
        "--val", metavar="MANIFEST", help="validation data: loss, best checkpoint, early stopping"
    )
    parser.add_argument(
        "--evaluate",
        nargs="+",
        default=[],
        metavar="SPLIT=MANIFEST",
        help="data scored before and after (e.g. dev=data/01_raw/demo/dev.jsonl)",
    )
    parser.add_argument(
        "--condition",
        nargs="+",
        default=[],
        metavar="SPLIT=CONDITION",
        help="score an --evaluate split's audio under an evaluation condition of --params' conditions, as the "
        "conditions stage degrades it (e.g. test_noisy=noisy with --evaluate test_noisy=data/01_raw/demo/test.jsonl)",
    )
    parser.add_argument(
        "--params",
        default="params.yaml",
        metavar="FILE",
        help="the params.yaml whose conditions section --condition names",
    )
    parser.add_argument(
        "--output-dir", required=True, metavar="DIR", help="where features, run and export go"
    )
    add_config_flags(parser, FLAGS, negatable=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.hf_finetune.stage import run_entry

    evaluate = {}
    for item in args.evaluate:
        split, sep, manifest = item.partition("=")
        if not sep or not split or not manifest:
            raise ValueError(
                f"--evaluate {item!r}: expected SPLIT=MANIFEST, e.g. dev=data/01_raw/demo/dev.jsonl"
            )
        evaluate[split] = manifest
    for item in args.condition:
        split, sep, condition = item.partition("=")
        if not sep or split not in evaluate:
            raise ValueError(
                f"--condition {item!r}: expected SPLIT=CONDITION with SPLIT one of --evaluate's ({', '.join(evaluate)})"
            )
        evaluate[split] = {"manifest": evaluate[split], "condition": condition}
    conditions = None
    if args.condition:
        from asr_pipeline.config_loader import read_params_file

        conditions = read_params_file(args.params).get("conditions")
    options = {key: value for key, (value, _) in given_overrides(args, FLAGS).items()}
    if "model" not in options:
        raise ValueError(
            "--model is required: a Whisper or Voxtral model folder (or a hub id where the Hub is reachable)"
        )
    entry = {"train": args.train, "val": args.val, "evaluate": evaluate, "options": options}
    output = Path(args.output_dir)
    metrics = run_entry(output.name, entry, output, conditions)
    print_json({"output_dir": str(output), "splits": metrics["splits"], "steps": metrics["train"]["steps"]})
    return 0
