"""cli.common: the checks every command makes before any work (input paths, positive numbers, a writable
output, shards rather than raw manifests, a real tokenizer file), each a one-line usage error naming the flag."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from asr_pipeline.cli.common import (
    UsageError,
    existing_path,
    load_tokenizer,
    positive,
    shard_paths,
    writable_output,
)
from asr_pipeline.io.shards import records_to_table, shard_name, write_shard


def test_an_input_path_must_exist(tmp_path):
    assert existing_path(str(tmp_path), "--input") == tmp_path
    with pytest.raises(UsageError, match=r"--input .*nowhere: no such file or folder"):
        existing_path(str(tmp_path / "nowhere"), "--input")


def test_positive_numbers_only_with_the_type_named():
    assert positive(int)("3") == 3 and positive(float)("0.5") == 0.5
    assert positive(float).__name__ == "positive float"
    with pytest.raises(argparse.ArgumentTypeError, match="must be above 0, got 0"):
        positive(int)("0")
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected a int above 0, got '1.5'"):
        positive(int)("1.5")


def test_an_output_may_be_new_below_an_existing_folder_but_not_a_file_taken_for_a_folder(tmp_path):
    (tmp_path / "taken").write_text("x")

    assert (
        writable_output(str(tmp_path / "new" / "deeper"), "--output", folder=True)
        == tmp_path / "new" / "deeper"
    )
    assert (
        writable_output(str(tmp_path / "out.parquet"), "--output", folder=False) == tmp_path / "out.parquet"
    )
    with pytest.raises(UsageError, match="is an existing file, not a folder"):
        writable_output(str(tmp_path / "taken"), "--output", folder=True)
    with pytest.raises(UsageError, match="taken is a file, so no folder can be made there"):
        writable_output(str(tmp_path / "taken" / "inside"), "--output", folder=True)


def test_shards_pass_and_a_raw_manifest_shows_the_command_that_makes_shards(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    record = {"id": "u", "features": np.zeros((2, 3)), "tokens": [1], "duration_ms": 20, "text": "a"}
    write_shard(records_to_table([record]), shards / shard_name(0))
    raw = tmp_path / "dev.jsonl"
    raw.write_text(json.dumps({"audio_filepath": "a.wav", "text": "a"}) + "\n")

    assert shard_paths([str(shards)], "--shards") == [str(shards / shard_name(0))]
    with pytest.raises(UsageError, match=r"is a raw manifest .* extract-features --input .*dev.jsonl "
                       r"--tokenizer tok.model --output .*dev_features"):  # fmt: skip
        shard_paths([str(raw)], "--shards", tokenizer="tok.model")
    with pytest.raises(UsageError, match="no such file or folder"):
        shard_paths([str(tmp_path / "missing")], "--shards")


def test_a_file_that_is_not_a_sentencepiece_model_is_a_usage_error(tmp_path):
    (tmp_path / "notes.model").write_text("not a model")

    with pytest.raises(UsageError, match=r"--tokenizer .*notes.model: not a SentencePiece model"):
        load_tokenizer(tmp_path / "notes.model", "--tokenizer", blank_id=0)
