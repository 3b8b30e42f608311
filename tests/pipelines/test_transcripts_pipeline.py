import json

import pytest

from asr_pipeline.io.datasets import Manifest, ManifestDataset
from asr_pipeline.io.report import InputError
from asr_pipeline.pipelines.transcripts import create_pipeline
from asr_pipeline.pipelines.transcripts.nodes import normalize_manifest
from tests.conftest import make_wav
from tests.pipelines.conftest import run_stage


def _raw_splits(tmp_path):
    train = tmp_path / "train"
    train.mkdir()
    for name, text in [("a", "Hello, World!"), ("b", "  "), ("c", "Good  MORNING")]:
        (train / f"{name}.wav").write_bytes(make_wav())
        (train / f"{name}.txt").write_text(text)
    dev = tmp_path / "dev.jsonl"
    dev.write_text(
        "\n".join(
            [
                json.dumps({"id": "d1", "audio_path": "a.wav", "text": "One"}),
                json.dumps({"id": "d1", "audio_path": "b.wav", "text": "Two"}),
                '{"broken": ',
                json.dumps({"id": "d3", "text": "no audio"}),
            ]
        )
        + "\n"
    )
    test = tmp_path / "test.jsonl"
    test.write_text(json.dumps({"id": "t1", "audio_path": "a.wav", "transcript": "Three."}) + "\n")
    test_open = tmp_path / "test_open.jsonl"
    test_open.write_text(json.dumps({"id": "o1", "audio_path": "a.wav", "text": "Open, Four!"}) + "\n")
    return {
        "train.raw_manifest": Manifest(train),
        "dev.raw_manifest": Manifest(dev),
        "test.raw_manifest": Manifest(test),
        "test_open.raw_manifest": Manifest(test_open),
    }


def test_transcripts_stage_normalizes_every_split_and_counts_skips(tmp_path, project_params):
    catalog = run_stage(
        create_pipeline(), _raw_splits(tmp_path), params={"transcripts": project_params["transcripts"]}
    )
    train = catalog.load("train.manifest")
    assert train["text"].to_list() == ["hello world", "good morning"]
    assert train.columns == [
        "id", "location", "source", "kind", "audio_path", "features_path", "rows", "cols", "text", "tokens",
        "offset_sec", "duration_sec",
    ]  # fmt: skip
    assert set(train["kind"]) == {"audio_file"}
    assert catalog.load("tokenizer_corpus") == "hello world\ngood morning\n"
    assert catalog.load("train.transcripts_report")["skipped_by_reason"] == {"empty transcript": 1}
    dev_report = catalog.load("dev.transcripts_report")
    assert dev_report["skipped_by_reason"] == {
        "duplicate id": 1,
        "malformed JSON": 1,
        "no audio or features": 1,
    }
    assert (dev_report["seen"], dev_report["kept"]) == (4, 1)
    assert catalog.load("test.manifest")["text"].to_list() == ["three"]
    assert catalog.load("test_open.manifest")["text"].to_list() == ["open four"]


def test_a_corpus_without_an_open_test_set_gets_an_empty_test_open_manifest(tmp_path, project_params):
    raw = {**_raw_splits(tmp_path), "test_open.raw_manifest": Manifest(None)}  # paths.raw_test_open: null

    catalog = run_stage(create_pipeline(), raw, params={"transcripts": project_params["transcripts"]})

    manifest = catalog.load("test_open.manifest")
    assert manifest.height == 0 and manifest.columns == catalog.load("test.manifest").columns
    assert (catalog.load("test_open.transcripts_report")["seen"], manifest.height) == (0, 0)


def test_audio_outside_the_corpus_folder_is_a_counted_skip_naming_the_row(tmp_path):
    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    corpus.mkdir()
    elsewhere.mkdir()
    (corpus / "in.wav").write_bytes(make_wav())
    (elsewhere / "out.wav").write_bytes(make_wav())
    (corpus / "link.wav").symlink_to(elsewhere / "out.wav")
    manifest = corpus / "train.jsonl"
    records = [("in", "in.wav"), ("up", "../elsewhere/out.wav"), ("abs", str(elsewhere / "out.wav"))]
    records.append(("link", "link.wav"))
    manifest.write_text(
        "".join(json.dumps({"id": i, "audio_path": a, "text": "a cat"}) + "\n" for i, a in records)
    )

    rows, report = normalize_manifest(Manifest(manifest, corpus=corpus), {})

    assert rows["id"].to_list() == ["in"]
    assert report["skipped_by_reason"] == {"outside the corpus folder": 3}
    shown = report["first_skipped"]["outside the corpus folder"]
    assert [line.split(": ")[0] for line in shown] == [f"{manifest}:{n}" for n in (2, 3, 4)]
    assert f"is {elsewhere / 'out.wav'}, outside paths.corpus={corpus}" in shown[2]  # the symlink, followed
    with pytest.raises(InputError, match=rf"^{manifest}:2: outside the corpus folder"):
        normalize_manifest(Manifest(manifest, corpus=corpus), {"strict": True})


def test_the_catalog_manifest_carries_its_corpus_folder_to_the_stage(tmp_path):
    (tmp_path / "train.jsonl").write_text("")

    manifest = ManifestDataset(str(tmp_path / "train.jsonl"), corpus=str(tmp_path)).load()

    assert manifest.corpus is not None and manifest.corpus.resolve() == tmp_path.resolve()
