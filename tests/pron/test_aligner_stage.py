"""pron.aligner_stage: the aligner's training config and the heads' examples (the whole stage, featurizing,
training and measuring an aligner: tests/pipelines/test_pron_aligner_pipeline.py)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from asr_pipeline.io.shards import records_to_table, write_shard
from asr_pipeline.pron.aligner_stage import aligner_config, head_examples, train_aligner_entry
from asr_pipeline.text.phones import NUM_CLASSES

SHARDS = {"train": ["train.parquet"], "dev": ["dev.parquet"], "test": ["test.parquet"]}


def phone_shard(path, rows: dict[str, int]) -> str:
    """A shard of utterance id -> that many phone targets, each over 4 frames of 3 features."""
    records = [
        {"id": utterance, "features": np.full((4 * count, 3), i, dtype=np.float32),
         "tokens": list(range(2, 2 + count)), "duration_ms": 40 * count, "text": ""}
        for i, (utterance, count) in enumerate(rows.items())
    ]  # fmt: skip
    write_shard(records_to_table(records), path)
    return str(path)


@pytest.mark.parametrize("frontend, width", [("mfcc", 39), ("fbank", 80)])
def test_the_aligner_trains_on_its_frontends_width_over_the_phone_inventory(tmp_path, frontend, width):
    train_params = {
        "launch": {"nproc_per_node": 2},
        "model": {"architecture": "zipformer"},  # params.yaml's ASR model: never the aligner's
        "optim": {"epochs": 7},
    }
    overrides = {"model": {"variant": "tiny"}, "optim": {"epochs": 2}}
    config = aligner_config(train_params, overrides, frontend, SHARDS, tmp_path / "run")
    assert (config.model.architecture, config.model.variant) == ("speech-aligner", "tiny")
    assert config.model.vocab_size == NUM_CLASSES
    assert config.data.input_dim == width
    assert (config.data.train_manifests, config.data.val_manifests) == (["train.parquet"], ["dev.parquet"])
    assert config.data.length_index is None and config.run.tokenizer is None
    assert config.optim.epochs == 2
    assert str(config.run.output_dir) == str(tmp_path / "run")


def test_head_examples_keep_utterances_whose_words_hold_their_phones(tmp_path):
    shard = phone_shard(tmp_path / "a.parquet", {"u1": 3, "u2": 2, "u3": 2})
    phones = pl.DataFrame(
        {"id": ["u1", "u2", "u3"], "word_phones": [[1, 2], [3], None]},
        schema={"id": pl.String, "word_phones": pl.List(pl.Int64)},
    )
    examples, left_out = head_examples([shard], phones)
    assert [e.id for e in examples] == ["u1"]
    [u1] = examples
    assert (u1.phones, u1.phones_per_word) == ([2, 3, 4], [1, 2])
    assert tuple(u1.features.shape) == (12, 3)  # (T, F)
    assert left_out == ["u2", "u3"]  # 3 phones in u2's words for 2 targets; u3 has no words


def test_an_unknown_frontend_is_refused_before_the_entrys_folder_is_emptied(tmp_path):
    (tmp_path / "kept").write_text("")
    with pytest.raises(
        ValueError, match=r"pron.aligners.big.frontend must be one of mfcc, fbank, got 'w2v-bert'"
    ):
        train_aligner_entry("big", {"frontend": "w2v-bert"}, tmp_path, {}, None, (b"", {}, {}), {}, tmp_path)
    assert (tmp_path / "kept").exists()
