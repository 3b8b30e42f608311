"""``asr-pipeline index``: one row per example of every shard with its lengths, and an output path below a file
refused before any shard is read."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from asr_pipeline.cli import main
from asr_pipeline.data.length_index import LENGTH_INDEX_SCHEMA
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.factories import write_corpus_shard

NUM_UTTERANCES = 8


@pytest.fixture(scope="module")
def shard_folder(tmp_path_factory: pytest.TempPathFactory, tokenizer: Path) -> Path:
    """Three shards of 3, 3 and 2 examples (``write_corpus_shard``)."""
    folder = tmp_path_factory.mktemp("shards")
    for index, count in enumerate((3, 3, 2)):
        path = folder / f"shard-{index:05d}.parquet"
        write_corpus_shard(path, CTCTokenizer.from_file(tokenizer), count, index, f"s{index}")
    return folder


def cli(*parts: object) -> int:
    return main([str(part) for part in parts])


def printed_json(capsys: pytest.CaptureFixture) -> dict:
    return json.loads(capsys.readouterr().out)


def test_index_to_a_path_below_a_file_exits_2_naming_it_before_reading_the_shards(
    tmp_path, shard_folder, capsys
):
    (tmp_path / "notes.txt").write_text("a user's file")

    status = cli("index", "--input", shard_folder, "--output", tmp_path / "notes.txt" / "index.parquet")
    [line] = capsys.readouterr().err.strip().splitlines()

    assert status == 2
    assert line == (
        f"asr-pipeline index: error: --output {tmp_path}/notes.txt/index.parquet: {tmp_path}/notes.txt is a file, "
        "so no folder can be made there"
    )


def test_index_has_one_row_per_example_with_its_lengths(tmp_path, shard_folder, capsys):
    output = tmp_path / "index.parquet"

    status = cli("index", "--input", shard_folder, "--output", output)
    summary = printed_json(capsys)

    assert status == 0 and summary == {"output": str(output), "shards": 3, "rows": NUM_UTTERANCES}
    index = pq.read_table(output)
    assert index.column_names == LENGTH_INDEX_SCHEMA.names
    assert index.column("row").to_pylist() == [0, 1, 2, 0, 1, 2, 0, 1]
    shards = pq.read_table(shard_folder, columns=["tokens", "rows"]).to_pylist()
    assert index.column("tokens").to_pylist() == [len(row["tokens"]) for row in shards]
    assert index.column("rows").to_pylist() == [row["rows"] for row in shards]
