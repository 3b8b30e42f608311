"""``asr-pipeline decode``: decode feature shards with a trained run and score them (WER/CER)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from asr_pipeline.cli.common import (
    HelpFormatter,
    UsageError,
    add_checkpoint_flag,
    existing_path,
    load_tokenizer,
    print_json,
    shard_paths,
)
from asr_pipeline.cli.config_flags import add_config_flags, config_flags
from asr_pipeline.decoding.options import DECODERS, DecodingOptions

if TYPE_CHECKING:
    from asr_pipeline.decoding.decoders import DecodingResources

SEARCH_OPTIONS = (
    "beam_width",
    "lm_weight",
    "word_score",
    "blank_penalty",
)  # the flags decode/transcribe take


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "decode",
        formatter_class=HelpFormatter,
        help="decode feature shards with a trained run; print WER/CER",
        description="Decode every utterance of --input with the run's latest checkpoint, greedily and with "
        "--decoder (flashlight's lexicon search with a word KenLM, its lexicon-free search with a piece KenLM, "
        "our Python prefix beam search, or the CUDA beam search); print WER/CER of both as JSON.",
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
    add_decoding_flags(
        parser,
        default_decoder=None,
        default_help="lexicon when the run has a lexicon (its own, recorded at training or its project's), "
        "else lexicon_free",
    )
    add_checkpoint_flag(parser)
    parser.add_argument("--batch-size", type=int, default=16, help="utterances per forward pass")
    parser.add_argument(
        "--output", metavar="JSONL", help="write hypotheses here (id, reference, greedy, <decoder>)"
    )
    parser.set_defaults(handler=run)


def add_decoding_flags(
    parser: argparse.ArgumentParser, default_decoder: str | None, default_help: str | None = None
) -> None:
    """--tokenizer and the decoder's flags, shared by ``decode`` and ``transcribe``."""
    parser.add_argument(
        "--tokenizer", metavar="MODEL", help="SentencePiece .model (default: <run-dir>/tokenizer.model)"
    )
    parser.add_argument(
        "--decoder",
        choices=DECODERS,
        default=default_decoder,
        help="the beam decoder" + (f" (default: {default_help})" if default_help else ""),
    )
    parser.add_argument(
        "--tuned",
        metavar="JSON",
        help="the tune_decoding stage's decoding.json: the --decoder's options chosen on dev (flags given too win)",
    )
    parser.add_argument(
        "--lm",
        metavar="KENLM",
        help="KenLM binary or ARPA: words for lexicon/prefix_beam, pieces for lexicon_free (default: the run's, "
        "recorded at training or its project's lm stage output)",
    )
    parser.add_argument(
        "--lexicon",
        metavar="TXT",
        help="word<TAB>pieces lexicon (the lexicon decoder needs it; default: the run's, as for --lm)",
    )
    # The beam search's options and their help are DecodingOptions' fields (decoding.options).
    add_config_flags(parser, [flag for flag in config_flags(DecodingOptions) if flag.key in SEARCH_OPTIONS])


def run_tokenizer_path(args: argparse.Namespace, run_dir: Path) -> Path:
    """--tokenizer, else the run's own (``run_layout.run_tokenizer``; a usage error when neither exists)."""
    from asr_pipeline.run_layout import run_tokenizer

    if args.tokenizer:
        return existing_path(args.tokenizer, "--tokenizer")
    try:
        return run_tokenizer(run_dir)
    except FileNotFoundError as error:
        raise UsageError(f"{error}; pass --tokenizer") from None


def decoding_resources(args: argparse.Namespace, run_dir: Path) -> DecodingResources:
    """--lm/--lexicon where given, else the run's own (``decoding.run_resources``); --lm is the word and the
    piece LM alike (the decoder reads the kind it fuses)."""
    from asr_pipeline.decoding.decoders import DecodingResources
    from asr_pipeline.decoding.run_resources import run_decoding_resources

    run_resources, _ = run_decoding_resources(run_dir)
    lm = existing_path(args.lm, "--lm") if args.lm else None
    lexicon = existing_path(args.lexicon, "--lexicon") if args.lexicon else None
    return DecodingResources(
        word_lm=lm or run_resources.word_lm,
        token_lm=lm or run_resources.token_lm,
        lexicon=lexicon or run_resources.lexicon,
    )


def build_decoders(
    args: argparse.Namespace, model, tokenizer, options: DecodingOptions, resources: DecodingResources
) -> dict:
    """greedy, and --decoder built from ``resources`` unless it is greedy or the run cannot use it."""
    from asr_pipeline.decoding.evaluation import beam_decoders_skipped, greedy_decoder

    decoders = {"greedy": greedy_decoder(model, tokenizer)}
    skipped = beam_decoders_skipped(model, [options.decoder] if options.decoder != "greedy" else [])
    if skipped:
        print(f"note: --decoder {options.decoder} skipped: {skipped[options.decoder]}", file=sys.stderr)
    elif options.decoder != "greedy":
        if options.decoder == "lexicon" and resources.lexicon is None:
            raise UsageError(
                "--decoder lexicon needs --lexicon (the tokenizer stage's lexicon.txt): the run has none of "
                "its own, recorded at training or in its project; or choose --decoder lexicon_free"
            )
        decoders[options.decoder] = resources.build(options, tokenizer)
    return decoders


def decoding_options(args: argparse.Namespace) -> DecodingOptions:
    """--tuned's options for --decoder (when given), overridden by the flags given."""
    values: dict = {"decoder": args.decoder}
    if args.tuned:
        tuned = json.loads(existing_path(args.tuned, "--tuned").read_text())
        if args.decoder not in tuned:
            raise UsageError(
                f"{args.tuned} holds options for {sorted(tuned)}, not for --decoder {args.decoder}"
            )
        values = {**tuned[args.decoder], **values}
    flags = {
        "beam_width": args.beam_width,
        "lm_weight": args.lm_weight,
        "word_score": args.word_score,
        "blank_penalty": args.blank_penalty,
    }
    values.update({name: value for name, value in flags.items() if value is not None})
    try:
        return DecodingOptions.from_dict(values, "decode options")
    except ValueError as error:
        raise UsageError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.decoding.evaluation import decode_and_score, load_run, run_log_probs
    from asr_pipeline.decoding.run_resources import default_decoder
    from asr_pipeline.run_layout import CONFIG_FILE, resolve_run_dir

    run_dir = resolve_run_dir(existing_path(args.run_dir, "--run-dir"))
    existing_path(str(run_dir / CONFIG_FILE), "--run-dir")
    tokenizer_path = run_tokenizer_path(args, run_dir)
    shards = shard_paths(args.input, "--input", tokenizer=tokenizer_path)
    resources = decoding_resources(args, run_dir)
    if args.decoder is None:
        args.decoder, note = default_decoder(resources)
        if note is not None:
            print(f"note: {note}", file=sys.stderr)
    options = decoding_options(args)
    model = load_run(run_dir, args.checkpoint, args.weights)
    tokenizer = load_tokenizer(
        tokenizer_path, "--tokenizer" if args.tokenizer else "the run's tokenizer", model.blank_id
    )
    decoders = build_decoders(args, model, tokenizer, options, resources)
    hypotheses, metrics = decode_and_score(run_log_probs(model, shards, args.batch_size), decoders)
    metrics["decoding"] = {name: value for name, value in vars(options).items()}
    if args.output:
        output = Path(args.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(hypotheses, encoding="utf-8")
        metrics["hypotheses"] = str(output)
    print_json(metrics)
    return 0
