"""What the command-line tests train on: a character tokenizer and one small feature shard of its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.factories import char_tokenizer_model, write_corpus_shard


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.model"
    path.write_bytes(char_tokenizer_model())
    return path


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory, tokenizer: Path) -> Path:
    """Eight utterances in one shard (``write_corpus_shard``: one example each, ids ``u-*``)."""
    folder = tmp_path_factory.mktemp("shards")
    return write_corpus_shard(folder / "shard-00000.parquet", CTCTokenizer.from_file(tokenizer), 8, 1, "u")
