import polars as pl
import pyarrow.parquet as pq
import pytest

from asr_pipeline.data.manifest_table import MANIFEST_SCHEMA
from asr_pipeline.io.report import NothingKeptError
from asr_pipeline.io.shards import SHARD_SCHEMA
from asr_pipeline.pipelines.features import create_pipeline
from asr_pipeline.pipelines.splits import SPLITS
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import make_wav
from tests.pipelines.conftest import feature_shard_datasets, run_stage


def _manifest(tmp_path, split, rows):
    records = []
    for i, (seconds, text, tokens) in enumerate(rows):
        path = tmp_path / f"{split}-{i}.wav"
        if seconds is not None:
            path.write_bytes(make_wav(seconds=seconds, sample_rate=22050))
        records.append(
            {
                "id": f"{split}-{i}",
                "location": f"m.jsonl:{i + 1}",
                "source": "m.jsonl",
                "kind": "audio_file",
                "audio_path": str(path),
                "text": text,
                "tokens": tokens,
            }
        )
    return pl.DataFrame(records, schema=MANIFEST_SCHEMA)


def test_features_stage_writes_shards_per_split_and_counts_bad_audio(tmp_path, spm_model, project_params):
    params = {**project_params["features"], "shard_size": 2}
    inputs = {
        "train.manifest": _manifest(
            tmp_path,
            "train",
            [(1.0, "the cat", None), (0.5, "a dog", None), (None, "lost", None), (0.3, "x", [3, 4])],
        ),
        "dev.manifest": _manifest(tmp_path, "dev", [(0.7, "the mat", None), (0.5, "bad ids", [999])]),
        "test.manifest": _manifest(tmp_path, "test", [(0.6, "a cat", None), (0.5, "привет мир", None)]),
        "test_open.manifest": _manifest(tmp_path, "test_open", [(0.4, "the dog", None)]),
        "tokenizer_model": spm_model,
    }
    datasets = feature_shard_datasets(tmp_path)
    catalog = run_stage(
        create_pipeline(),
        inputs,
        datasets,
        params={
            "features": params,
            "tokenizer": project_params["tokenizer"],
            "train": project_params["train"],
            "augmentation": None,
        },
    )

    train_shards = catalog.load("train.feature_shards")
    assert [p.rsplit("/", 1)[1] for p in train_shards] == ["shard-00000.parquet", "shard-00001.parquet"]
    first = pq.read_table(train_shards[0])
    assert first.schema.equals(SHARD_SCHEMA)
    assert first["rows"].to_pylist() == [98, 48]  # 1 + (N - 400) // 160 for 1.0 s and 0.5 s at 16 kHz
    assert set(first["cols"].to_pylist()) == {80}
    assert first["duration_ms"].to_pylist() == [1000, 500]
    assert first["tokens"].to_pylist()[0] == CTCTokenizer(spm_model).encode("the cat")
    assert pq.read_table(train_shards[1])["tokens"].to_pylist() == [[3, 4]]  # given tokens are kept

    train_report = catalog.load("train.extraction_report")
    assert (train_report["seen"], train_report["kept"], train_report["shards"]) == (4, 3, 2)
    assert train_report["skipped_by_reason"] == {"missing file": 1}
    assert "train-2.wav" in train_report["first_skipped"]["missing file"][0]
    assert catalog.load("dev.extraction_report")["skipped_by_reason"] == {
        "token id outside the vocabulary": 1
    }
    test_report = catalog.load("test.extraction_report")
    assert test_report["skipped_by_reason"] == {"too many unknown pieces": 1}, (
        "the tokenizer knows no Cyrillic"
    )
    assert train_report["kept_with"] == {"unknown pieces": {"count": 0, "share": 0.0}}
    [open_shard] = catalog.load("test_open.feature_shards")
    assert pq.read_table(open_shard)["text"].to_pylist() == ["the dog"]


def _run_features(tmp_path, spm_model, project_params, manifests):
    return run_stage(
        create_pipeline(),
        {**manifests, "tokenizer_model": spm_model},
        feature_shard_datasets(tmp_path),
        params={
            **{key: project_params[key] for key in ("features", "tokenizer", "train")},
            "augmentation": None,
        },
    )


def test_an_open_test_set_the_corpus_lacks_becomes_one_shard_without_rows(
    tmp_path, spm_model, project_params
):
    manifests = {
        f"{split}.manifest": _manifest(tmp_path, split, [(0.5, "the cat", None)]) for split in SPLITS
    }
    manifests["test_open.manifest"] = _manifest(tmp_path, "test_open", [])  # paths.raw_test_open: null

    catalog = _run_features(tmp_path, spm_model, project_params, manifests)

    [shard] = catalog.load("test_open.feature_shards")
    table = pq.read_table(shard)
    assert table.num_rows == 0 and table.schema.equals(SHARD_SCHEMA)
    report = catalog.load("test_open.extraction_report")
    assert (report["seen"], report["kept"], report["shards"], report["frames"]) == (0, 0, 1, 0)


def test_a_required_split_without_rows_still_fails(tmp_path, spm_model, project_params):
    manifests = {
        f"{split}.manifest": _manifest(tmp_path, split, [(0.5, "the cat", None)]) for split in SPLITS
    }
    manifests["test.manifest"] = _manifest(tmp_path, "test", [])

    with pytest.raises(NothingKeptError, match="feature extraction"):
        _run_features(tmp_path, spm_model, project_params, manifests)


def test_features_stage_fails_naming_the_skips_when_a_split_keeps_nothing(
    tmp_path, spm_model, project_params
):
    missing = _manifest(tmp_path, "train", [(None, "lost", None), (None, "gone", None)])
    inputs = {f"{split}.manifest": missing for split in SPLITS}
    datasets = feature_shard_datasets(tmp_path)

    with pytest.raises(NothingKeptError, match=r"all 2 records were skipped.*missing file: 2"):
        run_stage(
            create_pipeline(),
            {**inputs, "tokenizer_model": spm_model},
            datasets,
            params={
                **{key: project_params[key] for key in ("features", "tokenizer", "train")},
                "augmentation": None,
            },
        )
    assert not list((tmp_path / "features").rglob("*.parquet")), "no empty shard"


@pytest.mark.parametrize(
    ("architecture", "width"), [("squeezeformer", 80), ("zipformer", 80), ("w2v-bert", 160)]
)
def test_with_no_features_architecture_the_frontend_follows_the_models(
    tmp_path, spm_model, project_params, architecture, width
):
    assert project_params["features"]["architecture"] is None, "params.yaml lets the model choose"
    inputs = {f"{split}.manifest": _manifest(tmp_path, split, [(0.5, "the cat", None)]) for split in SPLITS}
    datasets = feature_shard_datasets(tmp_path)
    catalog = run_stage(
        create_pipeline(),
        {**inputs, "tokenizer_model": spm_model},
        datasets,
        params={
            "features": project_params["features"],
            "tokenizer": project_params["tokenizer"],
            "train": {"model": {"architecture": architecture}},
            "augmentation": None,
        },
    )

    [shard] = catalog.load("train.feature_shards")
    assert set(pq.read_table(shard)["cols"].to_pylist()) == {width}
