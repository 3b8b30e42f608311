"""``asr-pipeline decode``: decode feature shards with a trained run and score them (WER/CER)."""

from __future__ import annotations

import argparse
from pathlib import Path

from asr_pipeline.cli.common import HelpFormatter, UsageError, existing_path, print_json, shard_paths


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "decode",
        formatter_class=HelpFormatter,
        help="decode feature shards with a trained run; print WER/CER",
        description="Decode every utterance of --input with the run's latest checkpoint, greedily and by "
        "CTC prefix beam search (with KenLM shallow fusion when --lm is given); print WER/CER as JSON.",
    )
    parser.add_argument(
        "--run-dir",
        required=True,
        help="a training run dir (training_config.json, checkpoint), its checkpoint_latest/ folder or its "
        "checkpoint_latest.json",
    )
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="PATH",
        help="a feature shard or a folder of shards (made by extract-features); repeat for several",
    )
    parser.add_argument(
        "--tokenizer", metavar="MODEL", help="SentencePiece .model (default: <run-dir>/tokenizer.model)"
    )
    parser.add_argument(
        "--lm", metavar="KENLM", help="KenLM binary or ARPA for shallow fusion (default: none)"
    )
    parser.add_argument("--beam-width", type=int, default=8, help="beam width")
    parser.add_argument("--lm-weight", type=float, default=0.45, help="weight of the LM log-probability")
    parser.add_argument("--word-bonus", type=float, default=0.0, help="score added per completed word")
    parser.add_argument("--batch-size", type=int, default=16, help="utterances per forward pass")
    parser.add_argument(
        "--output", metavar="JSONL", help="write hypotheses here (id, reference, greedy, beam)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.decoding.beam_search import BeamSearchOptions, load_lm
    from asr_pipeline.decoding.evaluation import decode_and_score
    from asr_pipeline.run_layout import CONFIG_FILE, TOKENIZER_FILE, resolve_run_dir

    run_dir = resolve_run_dir(existing_path(args.run_dir, "--run-dir"))
    existing_path(str(run_dir / CONFIG_FILE), "--run-dir")
    if args.tokenizer:
        tokenizer_path = existing_path(args.tokenizer, "--tokenizer")
    elif (run_dir / TOKENIZER_FILE).is_file():
        tokenizer_path = run_dir / TOKENIZER_FILE
    else:
        raise UsageError(f"{run_dir / TOKENIZER_FILE} does not exist; pass --tokenizer")
    shards = shard_paths(args.input, "--input", tokenizer=tokenizer_path)
    lm = load_lm(existing_path(args.lm, "--lm")) if args.lm else None
    options = BeamSearchOptions(
        beam_width=args.beam_width, lm_weight=args.lm_weight, word_bonus=args.word_bonus
    )
    beam_name = "beam_lm" if lm is not None else "beam"
    hypotheses, metrics = decode_and_score(
        run_dir,
        shards,
        tokenizer_path.read_bytes(),
        options,
        lm=lm,
        batch_size=args.batch_size,
        beam_name=beam_name,
    )
    if args.output:
        output = Path(args.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(hypotheses, encoding="utf-8")
        metrics["hypotheses"] = str(output)
    print_json(metrics)
    return 0
