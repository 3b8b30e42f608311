"""The `hf_finetune` stage: an entry of params.yaml hf_finetune.runs fine-tunes a pretrained model folder on
demo speech, scores it before and after, exports a from_pretrained folder, and a rerun with other training
options reuses the cached features."""

from __future__ import annotations

import json

import pytest
import torch

from asr_pipeline.hf_finetune.export import load_finetuned
from asr_pipeline.hf_finetune.models import load_pretrained
from asr_pipeline.io.datasets import DirectoryDataset
from asr_pipeline.options import ConfigError
from asr_pipeline.pipelines.hf_finetune import create_pipeline
from asr_pipeline.training.distributed import FAIL_RANK_ENV, FAIL_STEP_ENV
from tests.hf_finetune.conftest import save_tiny_voxtral, short_sentences, write_demo_utterances
from tests.pipelines.conftest import run_stage


def entry(root, model, **options):
    return {"train": str(root / "train.jsonl"), "val": str(root / "val.jsonl"),
            "evaluate": {"dev": str(root / "val.jsonl")},
            "options": {"model": str(model), "method": "lora", "lora_rank": 1, "max_steps": 3, "batch_size": 4,
                        "warmup_steps": 1, "learning_rate": 1e-2, "max_new_tokens": 6, **options}}  # fmt: skip


CONDITIONS = {"seed": 7, "noisy": {"kind": "noise", "noise": "white", "snr_db": [5, 15]}}


def run(root, runs, current):
    params = {"hf_finetune": {"runs": runs, "current": current}, "conditions": CONDITIONS}
    run_stage(create_pipeline(), {}, {"hf_finetune_dir": DirectoryDataset(str(root / "out"))}, params)
    return json.loads((root / "out" / current / "metrics.json").read_text())


@pytest.mark.slow
def test_an_entry_is_scored_before_and_after_and_exported_and_a_rerun_reuses_its_features(tmp_path):
    texts = short_sentences(12)
    write_demo_utterances(tmp_path, texts[:8], "train", seed=1)
    write_demo_utterances(tmp_path, texts[8:], "val", seed=2)
    model = save_tiny_voxtral(tmp_path / "voxtral", texts)
    tiny = entry(tmp_path, model)
    tiny["evaluate"]["test_noisy"] = {"manifest": str(tmp_path / "val.jsonl"), "condition": "noisy"}
    metrics = run(tmp_path, {"tiny": tiny}, "tiny")
    assert metrics["features"]["evaluate/test_noisy"]["condition"] == "noisy"
    assert metrics["splits"]["test_noisy"]["utterances"] == 4
    dev = metrics["splits"]["dev"]
    assert (
        set(dev) == {"wer_before", "wer_after", "cer_before", "cer_after", "utterances"}
        and dev["utterances"] == 4
    )
    assert metrics["train"]["steps"] == 3 and not metrics["features"]["train"]["reused"]
    exported = load_pretrained(str(tmp_path / "out" / "tiny" / "export"))
    assert type(exported.model).__name__ == "VoxtralForConditionalGeneration"
    assert (tmp_path / "out" / "tiny" / "run" / "dvclive" / "metrics.json").is_file()
    again = run(tmp_path, {"tiny": {**tiny, "options": {**tiny["options"], "learning_rate": 5e-3}}}, "tiny")
    assert all(part["reused"] for part in again["features"].values())


def test_an_entry_with_an_unknown_key_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match=r"hf_finetune.runs.bad: unknown keys \[.trian.\]"):
        run(tmp_path, {"bad": {"trian": "x", "train": "y", "options": {"model": "m"}}}, "bad")


@pytest.mark.slow
def test_an_entry_resumed_from_another_entrys_killed_run_ends_with_the_uninterrupted_weights(
    tmp_path, monkeypatch
):
    texts = short_sentences(10)
    write_demo_utterances(tmp_path, texts[:7], "train", seed=1)
    write_demo_utterances(tmp_path, texts[7:], "val", seed=2)
    model = save_tiny_voxtral(tmp_path / "voxtral", texts)
    options = {
        "lora_dropout": 0.3,
        "max_steps": 4,
        "batch_size": 2,
        "save_every_steps": 1,
        "eval_every_steps": 2,
    }
    runs = {name: {**entry(tmp_path, model, **options), "evaluate": {}} for name in ("straight", "killed")}
    runs["continued"] = entry(
        tmp_path, model, **options, resume_from=str(tmp_path / "out" / "killed" / "run")
    )
    runs["continued"]["evaluate"] = {}
    run(tmp_path, runs, "straight")
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, "3")
    with pytest.raises(Exception, match="fault injected"):
        run(tmp_path, runs, "killed")
    monkeypatch.delenv(FAIL_RANK_ENV)
    assert run(tmp_path, runs, "continued")["train"]["steps"] == 4
    weights = [
        load_finetuned(tmp_path / "out" / name / "run", "latest", merge=False).model.state_dict()
        for name in ("straight", "continued")
    ]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    killed = json.loads((tmp_path / "out" / "killed" / "run" / "checkpoint_latest.json").read_text())
    assert killed["step"] == 3  # the killed run's folder is left as it was: the copy continued


def test_an_evaluate_split_is_a_manifest_or_a_manifest_under_a_known_condition(tmp_path):
    bad = {
        "train": "t",
        "options": {"model": "m"},
        "evaluate": {"test_noisy": {"manifest": "t", "cond": "noisy"}},
    }
    with pytest.raises(
        ConfigError, match=r"evaluate.test_noisy: expected a manifest path or \{manifest: PATH"
    ):
        run(tmp_path, {"bad": bad}, "bad")
    bad["evaluate"]["test_noisy"] = {"manifest": "t", "condition": "windy"}
    with pytest.raises(ValueError, match=r"'windy' is not in params.yaml conditions \(known: noisy\)"):
        run(tmp_path, {"bad": bad}, "bad")
