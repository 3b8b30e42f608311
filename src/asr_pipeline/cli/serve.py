"""``asr-pipeline serve``: a web page to try a trained run on uploaded or recorded audio (``serve.app``)."""

from __future__ import annotations

import argparse

from asr_pipeline.cli.common import HelpFormatter, UsageError, add_checkpoint_flag, existing_path
from asr_pipeline.serve.options import LIMITS, ServeOptions


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        formatter_class=HelpFormatter,
        help="a web page (Gradio) to transcribe uploaded or recorded audio with a trained run",
        description="Serve a page that transcribes uploaded or recorded audio with --run-dir (greedy, or beam "
        "search with --lm), showing the timing and the model card. It listens on --host (127.0.0.1: this "
        "machine only) and never opens a public share link.",
    )
    parser.add_argument(
        "--run-dir", help="a training run dir or an exported model folder (required, unless --train-runs)"
    )
    parser.add_argument(
        "--train-runs",
        metavar="DIR",
        help="serve the training page instead: a form that fine-tunes a pretrained Whisper or Voxtral model "
        "(asr-pipeline hf-finetune) into DIR/<name>, with its log and curves live and a Stop button",
    )
    parser.add_argument("--lm", metavar="KENLM", help="a word KenLM: adds beam search with it")
    parser.add_argument(
        "--lexicon", metavar="TXT", help="with --lm: the lexicon search (else the prefix search)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (0.0.0.0: every interface)"
    )
    parser.add_argument("--port", type=int, default=7860)
    for limit in LIMITS:  # default, type and help from the one place that holds them
        parser.add_argument(
            f"--{limit.name.replace('_', '-')}",
            type=type(limit.default),
            default=limit.default,
            help=limit.metadata["help"],
        )
    add_checkpoint_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.serve.app import serve

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1-65535, got {args.port}")
    if args.train_runs:
        if args.run_dir:
            raise UsageError("--train-runs serves the training page, which loads no run: leave --run-dir out")
        from asr_pipeline.serve.train_page import serve_train_page

        serve_train_page(args.train_runs, host=args.host, port=args.port)
        return 0
    if not args.run_dir:
        raise UsageError("--run-dir is required (or --train-runs DIR for the training page)")
    run_dir = existing_path(args.run_dir, "--run-dir")
    lm = existing_path(args.lm, "--lm") if args.lm else None
    lexicon = existing_path(args.lexicon, "--lexicon") if args.lexicon else None
    if lexicon is not None and lm is None:
        raise UsageError("--lexicon needs --lm (the word KenLM the lexicon search fuses)")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1-65535, got {args.port}")
    try:
        limits = {limit.name: getattr(args, limit.name) for limit in LIMITS}
        options = ServeOptions(**limits, checkpoint=args.checkpoint, weights=args.weights)
    except ValueError as error:
        raise UsageError(str(error)) from None
    serve(run_dir, lm=lm, lexicon=lexicon, host=args.host, port=args.port, options=options)
    return 0
