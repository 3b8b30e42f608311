import numpy as np

from asr_pipeline.io.shards import records_to_table, write_shard
from asr_pipeline.pipelines.index import create_pipeline
from tests.pipelines.conftest import run_stage


def test_index_stage_lists_every_train_and_dev_example_with_its_shard_and_lengths(tmp_path):
    paths = []
    for shard in range(2):
        records = [
            {
                "id": f"s{shard}-{i}",
                "features": np.zeros((5 + i, 3)),
                "tokens": [1] * (i + 1),
                "duration_ms": 50 + 10 * i,
                "text": "x",
            }
            for i in range(3)
        ]
        path = tmp_path / f"shard-{shard:05d}.parquet"
        write_shard(records_to_table(records), path)
        paths.append(str(path))
    inputs = {"train.feature_shards": paths[:1], "dev.feature_shards": paths[1:]}
    index = run_stage(create_pipeline(), inputs).load("length_index")
    assert index.height == 6
    assert index["shard"].to_list() == [paths[0]] * 3 + [paths[1]] * 3
    assert index["row"].to_list() == [0, 1, 2] * 2
    assert index["rows"].to_list() == [5, 6, 7] * 2
    assert index["tokens"].to_list() == [1, 2, 3] * 2
    assert index["shard_fingerprint"].n_unique() == 2
