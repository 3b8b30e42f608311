"""``asr-pipeline index``: the length index of feature shards (read from their length columns only)."""

from __future__ import annotations

import argparse

from asr_pipeline.cli.common import HelpFormatter, UsageError, print_json, shard_paths, writable_output


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        formatter_class=HelpFormatter,
        help="build the length index of feature shards",
        description="Read the length columns of every shard (never the features) into one Parquet index: "
        "shard, shard_fingerprint, row, rows, cols, tokens, duration_ms.",
    )
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="PATH",
        help="a shard file or a folder of shards; repeat for several",
    )
    parser.add_argument("--output", required=True, metavar="PARQUET", help="the index file to write")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from asr_pipeline.data.length_index import build_length_index

    shards = shard_paths(args.input, "--input")
    output = writable_output(args.output, "--output", folder=False)  # before reading every shard
    if output.is_dir():
        raise UsageError(f"--output {output} is a folder; give the .parquet file to write")
    index = build_length_index(shards)
    output.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(index, output)
    print_json({"output": str(output), "shards": len(shards), "rows": index.num_rows})
    return 0
