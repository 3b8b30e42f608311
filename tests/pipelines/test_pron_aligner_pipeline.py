"""The `pron_aligner` stage: an entry of params.yaml pron.aligners featurizes the transcripts with its frontend into
shards whose CTC targets are phones, trains the SpeechAligner on them and reports its phone error rate."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from asr_pipeline.demo.synthesis import Voice, synthesize
from asr_pipeline.io.datasets import DirectoryDataset, Manifest
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.pipelines.pron_aligner import create_pipeline
from asr_pipeline.pipelines.pron_phones.nodes import PHONE_SCHEMA
from asr_pipeline.pron.aligner_data import phone_error_rate
from asr_pipeline.pron.aligner_heads import load_aligner
from asr_pipeline.pron.demo_set import PronDemoParams, build_pron_demo_set
from asr_pipeline.run_layout import best_or_latest
from tests.conftest import PROJECT_ROOT
from tests.factories import untrained_run
from tests.pipelines.conftest import run_stage
from tests.pipelines.test_features_pipeline import _manifest

TEXTS = ["the cat", "a dog", "the cat sat", "a dog ran"]
PHONES = {
    "the": [8, 4],
    "cat": [21, 3, 32],
    "a": [4],
    "dog": [10, 5, 16],
    "sat": [30, 3, 32],
    "ran": [29, 3, 24],
}


def voiced_test_split(root: Path) -> tuple[pl.DataFrame, Manifest]:
    """TEXTS spoken by espeak-ng as the demo corpus lays out a split: the transcripts-stage manifest and the raw
    JSONL naming each voice (so the stage can resynthesize them for their true word starts)."""
    (root / "test").mkdir(parents=True)
    raw, manifest = [], _manifest(root, "test", [(None, text, None) for text in TEXTS])
    for i, text in enumerate(TEXTS):
        voice = Voice("en-us", ["m3", None][i % 2], 150 + 20 * i, 50)
        path = root / "test" / f"test-{i}.wav"
        path.write_bytes(synthesize(text, voice))
        raw.append({"id": f"test-{i}", "audio_path": f"test/{path.name}", "text": text,
                    "speaker": voice.espeak_name, "rate_wpm": voice.rate_wpm, "pitch": voice.pitch})  # fmt: skip
    (root / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in raw))
    paths = [str(root / "test" / f"test-{i}.wav") for i in range(len(TEXTS))]
    return manifest.with_columns(pl.Series("audio_path", paths)), Manifest(root / "test.jsonl")


def phone_table(manifest: pl.DataFrame, skip: str | None = None) -> pl.DataFrame:
    rows = []
    for utterance, text in zip(manifest["id"], manifest["text"], strict=True):
        if utterance == skip:
            continue
        ids = [i for word in text.split() for i in PHONES[word]]
        rows.append(
            {
                "id": utterance,
                "text": text,
                "words": text.split(),
                "word_phones": [len(PHONES[word]) for word in text.split()],
                "phones": [],
                "phone_ids": ids,
            }
        )
    return pl.DataFrame(rows, schema=PHONE_SCHEMA)


@pytest.mark.parametrize("frontend, width", [("mfcc", 39), pytest.param("fbank", 80, marks=pytest.mark.slow)])
def test_an_aligner_entry_trains_on_phone_targets_and_reports_its_phone_error_rate(
    tmp_path, spm_model, frontend, width
):
    manifests = {
        split: _manifest(tmp_path, split, [(0.5 + 0.1 * i, text, None) for i, text in enumerate(TEXTS)])
        for split in ("train", "dev")
    }
    manifests["test"], test_raw = voiced_test_split(tmp_path / "corpus")
    params = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    asr_run = untrained_run(tmp_path / "asr")  # an ASR run whose encoder feeds a head too (richer features)
    pron_demo = tmp_path / "pron_demo"
    demo = PronDemoParams(train_size=12, test_size=6, max_words=2, mispronounced_share=0.5, seed=3)
    for name, content in build_pron_demo_set(demo).items():
        (pron_demo / name).parent.mkdir(parents=True, exist_ok=True)
        (pron_demo / name).write_bytes(content)
    entry = {
        "frontend": frontend,
        "train": {
            "model": {"variant": "tiny"},
            "optim": {"epochs": 1, "learning_rate": 1e-3, "lr_warmup_steps": 1},
            "data": {"adaptive_batch_unit": "padded-attention", "adaptive_batch_budget": 200_000},
            "run": {"dvclive": False, "threads_per_rank": 1},
        },
        "scoring": {"epochs": 2, "batch_size": 4, "val_share": 0.3, "representations": [str(asr_run)]},
        "heads": {"epochs": 2, "batch_size": 2},
    }
    run_stage(
        create_pipeline(),
        {
            **{f"{split}.manifest": manifest for split, manifest in manifests.items()},
            "train.phones": phone_table(manifests["train"], skip="train-3"),  # no phones: left out, counted
            "dev.phones": phone_table(manifests["dev"]),
            "test.phones": phone_table(manifests["test"]),
            "test.raw_manifest": test_raw,
            "tokenizer_model": spm_model,
        },
        {
            "pron_dir": DirectoryDataset(str(tmp_path / "pron")),
            "pron_demo_dir": DirectoryDataset(str(pron_demo)),
        },
        {
            "features": params["features"],
            "tokenizer": params["tokenizer"],
            "train": {**params["train"], "launch": {"nproc_per_node": 1}},
            "pron": {"current": "a", "aligners": {"a": entry}},
        },
    )

    folder = tmp_path / "pron" / "aligners" / "a"
    [shard] = sorted((folder / "features" / "train").glob("*.parquet"))
    table = pq.read_table(shard)
    assert table["id"].to_pylist() == ["train-0", "train-1", "train-2"]
    assert table["tokens"].to_pylist()[2] == PHONES["the"] + PHONES["cat"] + PHONES["sat"]
    assert set(table["cols"].to_pylist()) == {width}
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["frontend"] == frontend and metrics["input_dim"] == width
    assert metrics["utterances_without_phones"] == {"train": 1, "dev": 0, "test": 0}
    assert metrics["test"]["utterances"] == 4 and metrics["test"]["per"] >= 0
    gop = metrics["gop"]
    assert gop["read"]["kept"] == 6 and gop["scored"]["seen"] == 6
    assert gop["scored"]["kept"] + gop["scored"]["skipped"] == 6
    assert gop["phone"]["items"] > gop["word"]["items"] >= gop["utterance"]["items"] == gop["scored"]["kept"]
    scoring = metrics["scoring"]
    assert scoring["read"]["train"]["kept"] == 12 and scoring["read"]["test"]["kept"] == 6
    for weight in ("ctc_weight_0", "ctc_weight_0.5"):
        assert len(scoring[weight]["epochs"]) == 2 and scoring[weight]["test"]["phone"]["items"] > 0
    assert "difference_ci" in scoring["ctc_weight_0_minus_ctc_weight_0.5"]
    assert (
        scoring[f"encoder:{asr_run}"]["test"]["phone"]["items"]
        == scoring["ctc_weight_0"]["test"]["phone"]["items"]
    )
    assert f"ctc_weight_0_minus_encoder:{asr_run}" in scoring
    config = json.loads((folder / "run" / "training_config.json").read_text())
    assert config["model"]["architecture"] == "speech-aligner" and config["model"]["vocab_size"] == 41
    heads = metrics["heads"]
    assert heads["without_word_phones"] == {"train": 0, "test": 0} and heads["file"] == "aligner.safetensors"
    assert heads["train_utterances"] + heads["unaligned"]["train"] == 3
    assert len(heads["epochs"]) == 2 and 0 <= heads["test"]["frame_accuracy"] <= 1
    truth = heads["test_word_starts"]  # every test utterance resynthesized: its true word starts are known
    assert truth["synthesizer"]["kept"] == 4 and truth["true"] == sum(len(t.split()) for t in TEXTS)
    for source in ("forced_alignment", "head"):
        assert 0 <= truth[source]["f1"] <= 1 and "median_offset_frames" in truth[source]
    aligner = load_aligner(folder / "aligner.safetensors")
    assert aligner.config.input_dim == width
    trained = dict(aligner.named_parameters())
    untrained = load_run_model(folder / "run", best_or_latest(folder / "run")[0]).model
    assert not torch.equal(trained["phone_head.weight"], untrained.phone_head.weight), "the heads trained"
    assert torch.equal(trained["ctc_head.weight"], untrained.ctc_head.weight), (
        "the trunk and CTC head did not"
    )


def test_the_phone_error_rate_is_edits_over_reference_phones():
    assert phone_error_rate([[1, 2, 3, 4], [5, 6]], [[1, 3, 4], [5, 6, 7]]) == pytest.approx(100 * 2 / 6)
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        phone_error_rate([[1], [2]], [[1]])
