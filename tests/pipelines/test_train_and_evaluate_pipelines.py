"""The train stage launches a real torchrun job; the evaluate stage decodes with the run it left."""

import json
import shutil
from pathlib import Path

import kenlm  # noqa: F401  (the evaluate stage needs the module; fail here, clearly, if it is missing)
import polars as pl
import pytest
from kedro.io import DatasetError
from safetensors.torch import save_file

from asr_pipeline.data.length_index import build_length_index
from asr_pipeline.decoding.lexicon import build_lexicon, piece_corpus
from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm
from asr_pipeline.io.datasets import DirectoryDataset, TrainedRunDataset
from asr_pipeline.io.shards import records_to_table, write_shard
from asr_pipeline.options import ConfigError
from asr_pipeline.pipelines.evaluate import create_pipeline as evaluate_pipeline
from asr_pipeline.pipelines.evaluate.nodes import evaluate_split
from asr_pipeline.pipelines.train import create_pipeline as train_pipeline
from asr_pipeline.pipelines.tune_decoding import create_pipeline as tune_pipeline
from asr_pipeline.pipelines.tune_decoding.nodes import tune_decoding
from asr_pipeline.run_layout import AVERAGE_FILE, CHECKPOINT_DIR, TOKENIZER_FILE, WEIGHTS_FILE
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.factories import (
    NUM_BINS,
    add_weight_averages,
    char_tokenizer_model,
    random_sentences,
    untrained_run,
    write_corpus_shard,
)
from tests.pipelines.conftest import run_stage

TRAIN_PARAMS = {
    "launch": {"nproc_per_node": 1},
    "data": {"input_dim": NUM_BINS, "adaptive_batch_budget": 480, "adaptive_batch_max_samples": 8},
    "model": {"architecture": "squeezeformer", "variant": "tiny"},
    "optim": {"epochs": 1, "learning_rate": 1e-3, "lr_warmup_steps": 2},
    "run": {"seed": 0, "log_every": 2},
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("stage")
    model = char_tokenizer_model()
    tokenizer = CTCTokenizer(model)
    shards = {
        split: [str(write_corpus_shard(root / f"{split}.parquet", tokenizer, count, seed, split))]
        for split, count, seed in (("train", 8, 1), ("dev", 4, 2), ("test", 3, 3))
    }
    index = pl.from_arrow(build_length_index(shards["train"] + shards["dev"]))
    run_dir = DirectoryDataset(str(root / "run"))
    trained_model = TrainedRunDataset(str(root / "run"), marker="checkpoint_latest.json")
    catalog = run_stage(
        train_pipeline(),
        {
            "train.feature_shards": shards["train"],
            "dev.feature_shards": shards["dev"],
            "length_index": index,
            "tokenizer_model": model,
        },
        datasets={"training_run_dir": run_dir, "trained_model": trained_model},
        params={"train": TRAIN_PARAMS},
    )
    return {
        "root": root,
        "shards": shards,
        "model": model,
        "run_dir": run_dir,
        "trained_model": trained_model,
        "metrics": catalog.load("training_metrics"),
    }


def test_train_stage_runs_torchrun_into_the_catalog_run_dir(trained):
    run_dir = trained["run_dir"].load()
    config = json.loads((run_dir / "training_config.json").read_text())
    assert config["data"]["train_manifests"] == trained["shards"]["train"]
    assert config["model"]["variant"] == "tiny"
    assert (run_dir / "tokenizer.model").read_bytes() == trained["model"]
    assert (run_dir / "checkpoint_latest" / "model.safetensors").is_file()
    assert trained["metrics"]["epochs"] == 1
    assert trained["trained_model"].load() == run_dir, "the trained run loads once its checkpoint exists"
    assert {"train_loss", "val_cer", "val_wer", "steps"} <= set(trained["metrics"])


def test_tune_decoding_then_evaluate_score_each_split_with_the_values_chosen_on_dev(trained, tmp_path):
    corpus = "\n".join(random_sentences(50, seed=9)) + "\n"
    tokenizer = CTCTokenizer(trained["model"])
    files = {"lexicon_file": tmp_path / "lexicon.txt", "word_lm_file": tmp_path / "lm.binary"}
    files["token_lm_file"] = tmp_path / "tokens_lm.binary"
    files["lexicon_file"].write_text(build_lexicon(corpus, tokenizer)[0], encoding="utf-8")
    files["word_lm_file"].write_bytes(build_kenlm(corpus, KenLMOptions(order=2))[1])
    files["token_lm_file"].write_bytes(build_kenlm(piece_corpus(corpus, tokenizer), KenLMOptions(order=4))[1])
    decoding = {
        "batch_size": 2,
        "beam_width": 4,
        "decoders": ["lexicon", "lexicon_free"],
        "tune": {
            "lexicon": {"lm_weight": [0.0, 0.5], "word_score": [0.0, 1.0]},
            "lexicon_free": {"lm_weight": [0.0]},
        },
    }
    inputs = {
        "trained_model": trained["trained_model"].load(),
        "dev.feature_shards": trained["shards"]["dev"],
        "test.feature_shards": trained["shards"]["test"],
        "tokenizer_model": trained["model"],
        **files,
    }
    tuning = run_stage(tune_pipeline(), inputs, params={"decoding": decoding})
    tuned, report = tuning.load("tuned_decoding"), tuning.load("tuning_report")
    assert len(report["lexicon"]["grid"]) == 4 and len(report["lexicon_free"]["grid"]) == 1
    chosen = report["lexicon"]["chosen"]
    assert {k: tuned["lexicon"][k] for k in chosen} == chosen
    assert report["lexicon"]["dev"]["wer"] == min(p["wer"] for p in report["lexicon"]["grid"])
    assert tuned["lexicon_free"]["decoder"] == "lexicon_free" and tuned["lexicon"]["beam_width"] == 4

    empty = (
        tmp_path / "test_open.parquet"
    )  # what the features stage writes when a corpus has no open test set
    write_shard(records_to_table([]), empty)
    inputs["test_open.feature_shards"] = [str(empty)]
    evaluation = evaluate_pipeline().only_nodes_with_namespaces(["dev", "test", "test_open"])
    catalog = run_stage(evaluation, {**inputs, "tuned_decoding": tuned}, params={"decoding": decoding})
    assert catalog.load("test_open.evaluation_metrics") == {"utterances": 0}
    assert catalog.load("test_open.hypotheses") == ""
    for split, count in (("dev", 4), ("test", 3)):
        metrics = catalog.load(f"{split}.evaluation_metrics")
        assert metrics["utterances"] == count
        assert set(metrics) == {"utterances", "greedy", "lexicon", "lexicon_free"}
        assert all(metrics[m][k] >= 0 for m in ("greedy", "lexicon", "lexicon_free") for k in ("wer", "cer"))
        rows = [json.loads(line) for line in catalog.load(f"{split}.hypotheses").splitlines()]
        assert [set(row) for row in rows] == [
            {"id", "reference", "greedy", "lexicon", "lexicon_free"}
        ] * count
        assert rows[0]["id"] == f"{split}-000"
    dev = catalog.load("dev.evaluation_metrics")
    assert dev["lexicon"] == report["lexicon"]["dev"], "evaluate on dev reproduces the tuned point"


def test_evaluation_cannot_load_a_run_that_has_no_checkpoint_yet(tmp_path):
    (tmp_path / "run").mkdir()

    with pytest.raises(DatasetError, match=r"no trained model in .*checkpoint_latest.json is missing"):
        TrainedRunDataset(str(tmp_path / "run"), marker="checkpoint_latest.json").load()


def test_the_stages_load_the_weights_decoding_weights_names(tmp_path):
    run_dir = untrained_run(tmp_path)
    average = add_weight_averages(run_dir)[AVERAGE_FILE]
    as_raw = tmp_path / "as_raw"  # the same run with the average as its raw weights
    shutil.copytree(run_dir, as_raw)
    save_file(average, as_raw / CHECKPOINT_DIR / WEIGHTS_FILE)
    shards = [str(path) for path in sorted((tmp_path / "shards").glob("*.parquet"))]
    tokenizer = (run_dir / TOKENIZER_FILE).read_bytes()

    def evaluate(run: Path, weights: str) -> str:
        params = {"weights": weights, "decoders": [], "batch_size": 2}
        return evaluate_split(run, shards, tokenizer, None, None, None, {}, params)[0]

    assert evaluate(run_dir, "averaged") == evaluate(as_raw, "raw") != evaluate(run_dir, "raw")
    with pytest.raises(
        ConfigError, match=r"^params.yaml decoding.weights ema: .*ema.safetensors does not exist"
    ):
        tune_decoding(run_dir, shards, tokenizer, None, None, None, {"weights": "ema", "decoders": []})
