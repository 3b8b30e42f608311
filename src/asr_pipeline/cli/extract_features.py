"""``asr-pipeline extract-features``: manifests and audio in, Parquet feature shards out.

Flag defaults are the fields of ``features.extract.ExtractionOptions`` (params.yaml ``features``), so the
command and the features stage extract alike unless told otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asr_pipeline.cli.common import (
    HelpFormatter,
    UsageError,
    existing_path,
    load_tokenizer,
    positive,
    print_json,
    writable_output,
)
from asr_pipeline.executors import EXECUTOR_KINDS, ExecutorOptions
from asr_pipeline.features.extract import ExtractionOptions
from asr_pipeline.features.frontends import FRONTENDS
from asr_pipeline.io.report import NothingKeptError, SkipReport
from asr_pipeline.io.shards import FEATURE_DTYPES
from asr_pipeline.models import registry
from asr_pipeline.models.feature_options import extraction_options

if TYPE_CHECKING:
    from asr_pipeline.features.extract import AudioOutcome
    from asr_pipeline.tui import LiveView


def _frontends_help() -> str:
    """Each frontend's features and the architectures that eat them, from the registries."""
    eaters: dict[str, list[str]] = {}
    for name in registry.architecture_names():
        eaters.setdefault(registry.frontend_of(name), []).append(name)
    return "; ".join(f"{FRONTENDS[kind].description} for {'/'.join(names)}" for kind, names in eaters.items())


def _default(name: str) -> Any:
    """The default of ``ExtractionOptions.<name>``: the one place it is set."""
    return {field.name: field.default for field in dataclasses.fields(ExtractionOptions)}[name]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "extract-features",
        formatter_class=HelpFormatter,
        help="decode audio, compute fbank features, tokenize: write Parquet feature shards",
        description="Read manifests/audio folders, normalize transcripts, compute the --architecture's "
        "features (80-bin Kaldi fbank, or w2v-BERT's 160-dim stacked fbank) and token ids, and write feature "
        "shards (directly usable as training manifests). Prints the skip report as JSON; fails, writing "
        "nothing, when every record is skipped.",
    )
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="PATH",
        help="a manifest (JSONL/JSON; TSV: feature list, audio_path<TAB>text or Common Voice; Parquet), a "
        "folder of them, a Kaldi data dir (wav.scp + text [+ segments]), a LibriSpeech split folder or an "
        "audio folder with .txt/.lab/.transcript sidecars; relative paths resolve against the manifest's "
        "folder; repeat for several",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="PATH",
        help="a .parquet file (one shard holding every example) or a folder (numbered shards "
        "shard-00000.parquet, ... of --shard-size examples; earlier shards there are replaced)",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="MODEL",
        help="SentencePiece .model file; without it (features for self-supervised pretraining) rows keep "
        "the tokens their manifest gives, else none, and their text",
    )
    parser.add_argument("--blank-id", type=int, default=0, help="CTC blank id the tokenizer maps around")
    parser.add_argument(
        "--max-audio-duration-sec",
        type=positive(float),
        default=_default("max_audio_duration_sec"),
        help="skip (and count) longer utterances; read from the audio header before decoding where it can be",
    )
    parser.add_argument(
        "--max-unknown-token-share",
        type=float,
        default=_default("max_unknown_token_share"),
        metavar="SHARE",
        help="skip (and count) an utterance when more than this share of its pieces are <unk> (text the "
        "tokenizer cannot spell; bare word boundaries not counted); 1 never skips",
    )
    parser.add_argument(
        "--max-samples", type=int, metavar="N", help="stop after N kept examples (default: all)"
    )
    parser.add_argument(
        "--shard-size",
        type=positive(int),
        default=_default("shard_size"),
        help="examples per shard when --output is a folder",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=_default("jobs"),
        metavar="N",
        help="worker processes decoding audio and computing features (shards are identical for any N); "
        "about the number of free CPU cores",
    )
    parser.add_argument(
        "--executor",
        choices=EXECUTOR_KINDS,
        default=ExecutorOptions.kind,
        help="where the --jobs work runs: processes (a pool on this machine) or dask (a Dask cluster: "
        "--dask-address, else a local cluster of --jobs worker processes); shards are identical either way",
    )
    parser.add_argument(
        "--dask-address",
        metavar="ADDR",
        help="the Dask scheduler to run on (tcp://host:8786); implies --executor dask",
    )
    parser.add_argument(
        "--input-dim",
        type=int,
        metavar="F",
        help="values per frame that precomputed features (inline or feature files) must have; "
        "default: the --architecture frontend's width (80, or 160 for w2v-bert)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail on the first bad record (naming it) instead of skipping and counting it",
    )
    parser.add_argument(
        "--architecture",
        choices=registry.architecture_names(),
        default=registry.DEFAULT_ARCHITECTURE,
        help=f"the model the features are for: {_frontends_help()}",
    )
    parser.add_argument(
        "--feature-dtype",
        choices=tuple(FEATURE_DTYPES),
        default=_default("feature_dtype"),
        help="how shards store features: float16 halves their size (readers return float32)",
    )
    parser.add_argument(
        "--tui",
        action="store_true",
        help="a live table: records decoded and kept, skips by reason, the current input and the last "
        "extracted example (the tqdm bar is always shown)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.executors import start_worker_server
    from asr_pipeline.features.extract import extract_records
    from asr_pipeline.text.normalize import NormalizationOptions, normalization_for_model
    from asr_pipeline.tui import LiveView

    inputs = [existing_path(path, "--input") for path in args.input]
    tokenizer_path = existing_path(args.tokenizer, "--tokenizer") if args.tokenizer else None
    output = writable_output(args.output, "--output", folder=Path(args.output).suffix != ".parquet")
    if args.max_samples is not None and args.max_samples < 1:
        raise UsageError("--max-samples must be >= 1")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    if args.input_dim is not None and args.input_dim < 1:
        raise UsageError(f"--input-dim must be >= 1, got {args.input_dim}")
    options = extraction_options(
        {
            "architecture": args.architecture,
            "feature_dtype": args.feature_dtype,
            "shard_size": args.shard_size,
            "max_audio_duration_sec": args.max_audio_duration_sec,
            "strict": args.strict,
            "jobs": args.jobs,
            "input_dim": args.input_dim,
            "max_unknown_token_share": args.max_unknown_token_share,
            "executor": {
                "kind": "dask" if args.dask_address else args.executor,
                "address": args.dask_address,
            },
        }
    )
    if options.jobs > 1 and options.executor.kind == "processes":
        start_worker_server()  # its torch import overlaps reading the manifests
    if tokenizer_path is None:
        tokenizer, normalization = None, NormalizationOptions()
    else:
        tokenizer = load_tokenizer(tokenizer_path, "--tokenizer", args.blank_id)
        # Transcripts are normalized as the tokenizer's were (its <prefix>.json sidecar), else the defaults.
        normalization = normalization_for_model(tokenizer_path)
    rows, read_report = _read_manifest_rows(inputs, strict=args.strict, normalization=normalization.to_dict())
    extraction_report = SkipReport(strict=args.strict)
    totals = {"frames": 0, "duration_ms": 0}
    with LiveView("extract-features") if args.tui else nullcontext() as view:
        on_row = ExtractionView(view, read_report) if view is not None else None
        extracted = extract_records(
            rows, tokenizer, options, extraction_report, total=len(rows), on_row=on_row
        )
        records = _count_frames(islice(extracted, args.max_samples), totals)  # islice(.., None): all
        try:
            written = _write_records(records, output, options.shard_size, options.feature_dtype)
        except NothingKeptError:
            # Raised again with the manifest-reading skips too: the one line names every reason.
            _combine_reports(read_report, extraction_report).require_kept("extract-features")
            raise
        finally:
            extracted.close()  # after --max-samples: stop the --jobs workers now

    report = _combine_reports(read_report, extraction_report).to_dict()
    stopped = args.max_samples is not None and extraction_report.kept >= args.max_samples
    print_json(
        {
            **report,
            "stopped_at_max_samples": stopped,
            **totals,
            "hours": round(totals["duration_ms"] / 3.6e6, 4),
            "shards": [str(path) for path in written],
        }
    )
    return 0


def _write_records(
    records: Iterable[dict], output: Path, shard_size: int, feature_dtype: str = "float32"
) -> list[Path]:
    """One .parquet file, or a folder of numbered shards; returns the paths written."""
    from asr_pipeline.features.extract import batch_into_shards
    from asr_pipeline.io.datasets import FeatureShardsDataset, ShardChunk
    from asr_pipeline.io.shards import records_to_table, shard_name, write_shard

    if output.suffix == ".parquet":
        output.parent.mkdir(parents=True, exist_ok=True)
        write_shard(records_to_table(list(records), feature_dtype), output)
        written = [output]
    else:
        shards = FeatureShardsDataset(str(output))  # replaces stale shards exactly as the features stage does
        written = []
        # Shard k is compressed and written on a thread (Arrow releases the GIL) while shard k+1's records
        # are gathered; one write at a time, in order, so memory holds at most two shards.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="shard-writer") as writer:
            writing: Future | None = None
            for index, table in enumerate(batch_into_shards(records, shard_size, feature_dtype)):
                if writing is not None:
                    writing.result()  # re-raises a failed write here
                writing = writer.submit(shards.save, ShardChunk(index, table))
                written.append(output / shard_name(index))
            if writing is not None:
                writing.result()
    return written


def _read_manifest_rows(
    inputs: list[Path], strict: bool, normalization: dict | None = None
) -> tuple[list[dict], SkipReport]:
    """Manifest rows as the transcripts stage makes them (normalized text, duplicates and bad rows skipped).

    An id repeated across inputs is skipped too: shard ids must be unique within a split.
    """
    from asr_pipeline.data.manifest_table import normalize_manifest_records
    from asr_pipeline.io.datasets import Manifest
    from asr_pipeline.text.normalize import NormalizationOptions

    report = SkipReport(strict=strict)
    rows: list[dict] = []
    first_seen: dict[str, str] = {}
    for path in inputs:
        options = NormalizationOptions.from_dict(normalization)
        manifest, manifest_report = normalize_manifest_records(Manifest(path), options, strict=strict)
        _absorb(report, manifest_report)
        for row in manifest.iter_rows(named=True):
            if row["id"] in first_seen:
                where = first_seen[row["id"]]
                report.skip("duplicate id", row["location"], f"{row['id']!r} first seen at {where}")
                continue
            first_seen[row["id"]] = row["location"]
            rows.append(row)
    return rows, report


def _count_frames(records: Iterable[dict], totals: dict[str, int]) -> Iterator[dict]:
    for record in records:
        totals["frames"] += int(record["features"].shape[0])
        totals["duration_ms"] += int(record["duration_ms"])
        yield record


def _absorb(report: SkipReport, other: dict) -> None:
    """Add another report's counts (``SkipReport.to_dict`` form) to ``report``."""
    report.seen += other["seen"]
    report.counts.update(other["skipped_by_reason"])
    for reason, examples in other["first_skipped"].items():
        shown = report.examples.setdefault(reason, [])
        shown.extend(examples[: report.max_examples - len(shown)])


def _combine_reports(read: SkipReport, extraction: SkipReport) -> SkipReport:
    """One report: every manifest record seen, skipped while reading or extracting, or kept in a shard."""
    combined = SkipReport(seen=read.seen)
    _absorb(combined, {**read.to_dict(), "seen": 0})
    _absorb(combined, {**extraction.to_dict(), "seen": 0})
    combined.kept = extraction.kept
    combined.notes.update(extraction.notes)
    return combined


class ExtractionView:
    """Feeds the ``--tui`` table from ``extract_records``'s per-row callback (a ``RowObserver``).

    Shows rows seen, decoded and kept, skips by reason (those of manifest reading included), the input
    being read and the last example extracted; the event lines list the latest examples and skips.
    """

    def __init__(self, view: LiveView, read_report: SkipReport) -> None:
        self.view = view
        self.read_skips = dict(read_report.counts)
        self.seen_counts: dict[str, int] = {}  # extraction skips so far, to name the reason of a new one
        self.decoded = 0
        view.update(seen=0, decoded=0, kept=0, **self._skips({}))

    def __call__(self, row: dict, audio: AudioOutcome, record: dict | None, report: SkipReport) -> None:
        # Decoded (or loaded): features were made, or a duration was measured before a later skip (too long,
        # silent); decode failures carry neither.
        self.decoded += audio.features is not None or audio.duration_ms > 0
        self.view.update(
            seen=report.seen,
            decoded=self.decoded,
            kept=report.kept,
            **self._skips(report.counts),
            input=row["location"].rsplit(":", 1)[0],
            file=row.get("audio_path") or row["location"],
        )
        if record is None:
            reason = next((r for r, n in report.counts.items() if n != self.seen_counts.get(r)), "skipped")
            self.seen_counts = dict(report.counts)
            self.view.log(f"skipped {row['location']}: {reason}")
            return
        frames = int(record["features"].shape[0])
        last = f"{record['id']}  {record['duration_ms'] / 1000:.2f} s  {frames} frames"
        self.view.update(last_example=last)
        self.view.log(last)

    def _skips(self, extraction_counts: dict[str, int]) -> dict[str, int]:
        """Skip counts by reason, manifest reading's and extraction's together, as table rows."""
        counts = dict(self.read_skips)
        for reason, count in extraction_counts.items():
            counts[reason] = counts.get(reason, 0) + count
        return {f"skipped: {reason}": count for reason, count in sorted(counts.items())}
