"""``asr-pipeline transcribe``: audio files in, text (txt, JSONL with word times, or SRT subtitles) out.

The library work is ``decoding.transcribe``: windows, the run's frontend, the decoder, timestamps. Without
``--decoder``: greedy, or with ``--lm`` the lexicon search when there is a lexicon (``--lexicon``, else the
run's own: ``decoding.run_resources``), else our prefix beam search (both take a word KenLM).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from tqdm import tqdm

from asr_pipeline.cli.common import (
    HelpFormatter,
    UsageError,
    add_checkpoint_flag,
    existing_path,
    load_tokenizer,
    print_json,
)
from asr_pipeline.cli.config_flags import add_config_flags, config_flags, given_overrides
from asr_pipeline.cli.decode import (
    add_decoding_flags,
    build_decoders,
    decoding_options,
    decoding_resources,
    run_tokenizer_path,
)
from asr_pipeline.decoding.windows import WindowOptions


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transcribe",
        formatter_class=HelpFormatter,
        help="transcribe audio files with a trained run (txt, JSONL with word times, or SRT)",
        description="Decode audio files of any supported format and rate with the run's own frontend and "
        "model, long ones in windows (cut at silences by default), and print or write the text. Inputs: "
        "audio files, folders of them, or manifests (JSONL/JSON/TSV/Parquet rows with audio paths). "
        "Unreadable audio is skipped and counted (--strict: an error naming the file); when every input is "
        "skipped the command fails (exit 1) with the skips by reason and file.",
    )
    parser.add_argument(
        "audio", nargs="+", metavar="AUDIO", help="audio files, folders of them, or manifests"
    )
    parser.add_argument(
        "--run-dir",
        required=True,
        help="a training run dir, its checkpoint_latest/ folder or its .json pointer",
    )
    add_decoding_flags(parser, default_decoder=None)
    add_checkpoint_flag(parser)
    parser.add_argument(
        "--output",
        choices=("txt", "jsonl", "srt"),
        default="txt",
        help="txt: the text (with the source and a tab when there are several inputs); jsonl: text, words "
        "with start/end seconds and windows; srt: subtitles timed from the CTC frames",
    )
    parser.add_argument(
        "--output-path",
        metavar="PATH",
        help="write here instead of stdout; with --output srt and several inputs a folder (one <name>.srt each)",
    )
    add_config_flags(parser, config_flags(WindowOptions))  # --window-sec, --split: WindowOptions' fields
    parser.add_argument("--strict", action="store_true", help="stop at the first unreadable file, naming it")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.decoding.evaluation import load_run
    from asr_pipeline.decoding.transcribe import (
        Transcriber,
        audio_inputs,
        format_jsonl,
        format_srt,
        format_txt,
        transcribe_inputs,
    )
    from asr_pipeline.io.report import SkipReport
    from asr_pipeline.run_layout import CONFIG_FILE, resolve_run_dir

    run_dir = resolve_run_dir(existing_path(args.run_dir, "--run-dir"))
    existing_path(str(run_dir / CONFIG_FILE), "--run-dir")
    tokenizer_path = run_tokenizer_path(args, run_dir)
    for path in args.audio:
        existing_path(path, "AUDIO")
    resources = decoding_resources(args, run_dir)  # --lm/--lexicon, else the run's own
    if args.decoder is None:
        args.decoder = "greedy" if not args.lm else ("lexicon" if resources.lexicon else "prefix_beam")
    options = decoding_options(args)
    try:
        window = WindowOptions.from_dict(
            {key: value for key, (value, _) in given_overrides(args, config_flags(WindowOptions)).items()}
        )
    except ValueError as error:
        raise UsageError(f"--window-sec: {error}") from None
    report = SkipReport(strict=args.strict)
    inputs = audio_inputs(args.audio, report)
    if args.output == "srt" and len(inputs) > 1 and not args.output_path:
        raise UsageError("--output srt with several inputs needs --output-path FOLDER (one .srt per input)")
    model = load_run(run_dir, args.checkpoint, args.weights)
    tokenizer = load_tokenizer(
        tokenizer_path, "--tokenizer" if args.tokenizer else "the run's tokenizer", model.blank_id
    )
    decoders = build_decoders(args, model, tokenizer, options, resources)
    decoder = decoders.get(options.decoder, decoders["greedy"])
    transcriber = Transcriber(model, tokenizer, decoder, window)

    several = len(inputs) > 1
    srt_folder = Path(args.output_path) if args.output == "srt" and several else None
    formats = {"txt": lambda t: format_txt(t, with_source=several), "jsonl": format_jsonl, "srt": format_srt}
    progress = tqdm(inputs, desc="transcribe", unit="file", disable=None, file=sys.stderr)
    transcripts = transcribe_inputs(transcriber, progress, report)
    with contextlib.ExitStack() as stack:
        stream = sys.stdout
        if args.output_path and srt_folder is None:
            Path(args.output_path).parent.mkdir(parents=True, exist_ok=True)
            stream = stack.enter_context(Path(args.output_path).open("w", encoding="utf-8"))
        written = 0
        used_names: set[str] = set()
        for transcript in transcripts:
            if srt_folder is not None:  # one file each, named by the input (numbered when names repeat)
                name = Path(transcript.source).stem
                name = name if name not in used_names else f"{name}-{written}"
                used_names.add(name)
                srt_folder.mkdir(parents=True, exist_ok=True)
                (srt_folder / f"{name}.srt").write_text(format_srt(transcript), encoding="utf-8")
            else:
                stream.write(formats[args.output](transcript))
                stream.flush()
            written += 1
    summary = {**report.to_dict(), "transcribed": written, "decoder": options.decoder}
    if args.output_path:
        print_json({**summary, "output": args.output_path})
    else:
        print(json.dumps(summary), file=sys.stderr)
    if written == 0:  # every input skipped: a failure naming the skips, not "transcribed: 0" and exit 0
        report.seen = max(report.seen, report.skipped)  # manifest rows skipped before decoding were seen too
        report.require_kept("transcribe")
    return 0
