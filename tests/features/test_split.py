"""A split's manifest streamed into feature shards: each shard comes with the report so far, the last one
complete; a condition becomes the one-condition augmentation mix."""

from __future__ import annotations

import polars as pl

from asr_pipeline.features.extract import ExtractionOptions
from asr_pipeline.features.split import condition_mix, stream_split_shards
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import TINY_SENTENCES, make_wav


def test_each_shard_comes_with_the_report_so_far_and_the_last_report_is_complete(spm_model, tmp_path):
    rows = []
    for i in range(5):  # 3 shards of 2, 2, 1; the missing file is skipped and counted
        path = tmp_path / f"utt{i}.wav"
        if i != 2:
            path.write_bytes(make_wav(seconds=0.5, freq=300.0 + 50 * i))
        rows.append(
            {
                "id": f"utt{i}",
                "location": f"m.jsonl:{i + 1}",
                "audio_path": str(path),
                "text": TINY_SENTENCES[i % len(TINY_SENTENCES)],
            }
        )
    manifest = pl.DataFrame(rows)

    out = list(stream_split_shards(manifest, CTCTokenizer(spm_model), ExtractionOptions(shard_size=2)))

    assert [chunk.index for chunk, _ in out] == [0, 1]
    assert [chunk.table.num_rows for chunk, _ in out] == [2, 2]
    last = out[-1][1]
    assert last["shards"] == 2 and last["kept"] == 4 and last["skipped_by_reason"] == {"missing file": 1}
    assert last["duration_ms"] == 4 * 500 and out[0][1]["duration_ms"] == 2 * 500


def test_a_condition_becomes_a_mix_of_that_one_condition_seeded():
    assert condition_mix("noisy", {"kind": "noise", "snr_db": 10}, seed=3) == {
        "seed": 3,
        "conditions": [{"name": "noisy", "weight": 1.0, "kind": "noise", "snr_db": 10}],
    }
