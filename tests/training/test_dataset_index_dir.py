"""``--dataset-index-dir``: the training data path caches the shards' length index in that folder."""

from __future__ import annotations

import pytest

from asr_pipeline.cli import build_parser
from asr_pipeline.cli.train import train_config_from_args
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.loaders import build_data

from .conftest import tiny_config
from .test_on_the_fly import SINGLE

pytestmark = pytest.mark.usefixtures("single_process")


def test_build_data_writes_the_index_cache_and_plans_the_same_batches_from_it(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    config["data"] |= {"length_index": None, "dataset_index_dir": str(tmp_path / "index")}
    resolved = resolve_config(config)

    built = build_data(resolved, SINGLE)
    cached = sorted((tmp_path / "index").glob("length_index-*.parquet"))
    reused = build_data(resolved, SINGLE)

    assert len(cached) == 2  # one per shard list: training and validation
    assert list(built.train_sampler) == list(reused.train_sampler)


def test_the_flag_sets_the_config_key(tmp_path, corpus):
    args = build_parser().parse_args(
        ["train", "--train-manifest", corpus["train"][0], "--dataset-index-dir", str(tmp_path / "i")]
    )
    assert train_config_from_args(args)[0].data.dataset_index_dir == str(tmp_path / "i")
