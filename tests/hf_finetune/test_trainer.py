"""Fine-tuning tiny random-weight Whisper and Voxtral models on demo speech: the loss falls, LoRA trains a
sliver of the weights and merges exactly, resume is bit-identical, the export reloads with from_pretrained."""

from __future__ import annotations

import json

import pytest
import torch

from asr_pipeline.hf_finetune.collate import SpeechCollator
from asr_pipeline.hf_finetune.evaluate import transcribe_shards
from asr_pipeline.hf_finetune.export import export_finetuned, load_finetuned
from asr_pipeline.hf_finetune.features import FeatureShards, featurize
from asr_pipeline.hf_finetune.models import load_pretrained
from asr_pipeline.hf_finetune.options import hf_finetune_options
from asr_pipeline.hf_finetune.trainer import FinetuneRun, autocast_dtype, pick_device
from asr_pipeline.training.events import read_events

SLOW = pytest.mark.slow  # each loads and trains a model: 10-40 s on a shared CPU


def features(demo_speech, model_dir, cache):
    loaded = load_pretrained(str(model_dir))
    return [featurize(demo_speech[split], loaded.feature_extractor, cache, max_windows=loaded.family.max_windows,
                      max_audio_sec=30).directory for split in ("train", "val")]  # fmt: skip


def train(model_dir, data, run_dir, **values):
    options = hf_finetune_options({"model": str(model_dir), "batch_size": 4, "warmup_steps": 2, **values})
    return FinetuneRun(options, data[0], data[1], run_dir).run()


@SLOW
def test_validation_loss_falls_in_a_full_fine_tune(tiny_model, demo_speech, tmp_path):
    data = features(demo_speech, tiny_model, tmp_path / "cache")
    results = train(tiny_model, data, tmp_path / "run", method="full", learning_rate=3e-3, epochs=3, eval_wer=True,
                    max_new_tokens=8)  # fmt: skip
    validations = read_events(tmp_path / "run", "validation")
    losses = [event["values"]["val_loss"] for event in validations]
    assert all(event["values"]["val_wer"] >= 0 and event["values"]["samples"] for event in validations)
    assert len(losses) == 3 and losses[-1] < losses[0] - 0.1, losses
    assert results["best_val_loss"] == min(losses) and results["steps"] == 9  # 3 batches of 4, 4, 2 per epoch


@SLOW
def test_lora_trains_under_2_percent_and_its_merged_export_gives_the_adapter_logits(
    tiny_model, demo_speech, tmp_path
):
    data = features(demo_speech, tiny_model, tmp_path / "cache")
    results = train(
        tiny_model, data, tmp_path / "run", method="lora", lora_rank=1, learning_rate=1e-2, epochs=2
    )
    assert results["trainable_params"] < 0.02 * results["total_params"]
    adapted = load_finetuned(tmp_path / "run", merge=False)
    assert any(
        "lora_B" in name and p.abs().sum() > 0 for name, p in adapted.model.named_parameters()
    )  # trained
    export_finetuned(tmp_path / "run", tmp_path / "export", evaluation={"dev": {"after": {"wer": 1.0}}})
    exported = load_pretrained(str(tmp_path / "export"))  # from_pretrained of the folder, as a user loads it
    assert not any("lora" in name for name, _ in exported.model.named_parameters())
    shards = FeatureShards(data[1])
    batch = SpeechCollator(adapted.tokenizer, adapted.family, 400)([shards[i] for i in range(len(shards))])
    with torch.no_grad():
        expected = adapted.model(**adapted.family.model_inputs(batch)).logits
        merged = exported.model.eval()(**exported.family.model_inputs(batch)).logits
    assert torch.allclose(merged, expected, atol=1e-5, rtol=0)
    assert transcribe_shards(exported, shards, max_new_tokens=8) == transcribe_shards(
        adapted, shards, max_new_tokens=8
    )
    files = {path.name for path in (tmp_path / "export").iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "preprocessor_config.json",
            "training_config.json", "train_results.json", "eval_results.json", "README.md"} <= files  # fmt: skip
    assert "WER" in (tmp_path / "export" / "README.md").read_text()


class Interrupted(FinetuneRun):
    """A run killed as its third optimizer step begins (after step 2's checkpoint)."""

    def train_step(self, group):
        if self.step == 2:
            raise KeyboardInterrupt
        return super().train_step(group)


@SLOW
def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tiny_whisper, demo_speech, tmp_path):
    data = features(demo_speech, tiny_whisper, tmp_path / "cache")
    values = {"model": str(tiny_whisper), "method": "lora", "lora_dropout": 0.3, "batch_size": 3, "epochs": 2,
              "warmup_steps": 2, "learning_rate": 1e-2, "save_every_steps": 1, "eval_every_steps": 2}  # fmt: skip
    options = hf_finetune_options(values)
    FinetuneRun(options, data[0], data[1], tmp_path / "straight").run()
    with pytest.raises(KeyboardInterrupt):
        Interrupted(options, data[0], data[1], tmp_path / "resumed").run()
    assert json.loads((tmp_path / "resumed" / "checkpoint_latest.json").read_text())["step"] == 2
    FinetuneRun(options, data[0], data[1], tmp_path / "resumed").run()
    straight = load_finetuned(tmp_path / "straight", "latest", merge=False).model.state_dict()
    resumed = load_finetuned(tmp_path / "resumed", "latest", merge=False).model.state_dict()
    assert straight.keys() == resumed.keys()
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
    losses = [
        [e["values"]["val_loss"] for e in read_events(tmp_path / run, "validation")]
        for run in ("straight", "resumed")
    ]
    assert losses[0] == losses[1]


@SLOW
def test_resuming_with_other_options_is_refused(tiny_voxtral, demo_speech, tmp_path):
    data = features(demo_speech, tiny_voxtral, tmp_path / "cache")
    train(tiny_voxtral, data, tmp_path / "run", method="lora", max_steps=1)
    with pytest.raises(ValueError, match="learning_rate differ"):
        train(tiny_voxtral, data, tmp_path / "run", method="lora", max_steps=1, learning_rate=5e-4)


@SLOW
def test_a_voxtral_with_its_own_tekken_tokenizer_fine_tunes_and_exports_it(
    tiny_voxtral_tekken, demo_speech, tmp_path
):
    data = features(demo_speech, tiny_voxtral_tekken, tmp_path / "cache")
    results = train(tiny_voxtral_tekken, data, tmp_path / "run", method="lora", max_steps=2, eval_wer=True,
                    max_new_tokens=4)  # fmt: skip
    assert results["steps"] == 2 and results["best_val_loss"] > 0
    export_finetuned(tmp_path / "run", tmp_path / "export")
    exported = load_pretrained(str(tmp_path / "export"))
    assert (tmp_path / "export" / "tekken.json").read_bytes() == (
        tiny_voxtral_tekken / "tekken.json"
    ).read_bytes()
    assert type(exported.tokenizer).__name__ == "MistralCommonBackend"
    shards = FeatureShards(data[1])
    adapted = load_finetuned(tmp_path / "run", merge=False)
    assert transcribe_shards(exported, shards, max_new_tokens=4) == transcribe_shards(
        adapted, shards, max_new_tokens=4
    )


def test_the_cpu_trains_in_float32_whatever_the_precision_asked():
    cpu = torch.device("cpu")
    assert [autocast_dtype(p, cpu) for p in ("auto", "f32", "bf16", "f16")] == [None] * 4


def test_auto_picks_cuda_only_when_torch_sees_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto").type == "cpu"
    with pytest.raises(RuntimeError, match="no CUDA GPU; set device auto or cpu"):
        pick_device("cuda")


def test_on_cuda_auto_is_bf16_where_supported_else_f16(monkeypatch):
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert autocast_dtype("auto", cuda) is torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert (autocast_dtype("auto", cuda), autocast_dtype("f16", cuda), autocast_dtype("f32", cuda)) == (
        torch.float16,
        torch.float16,
        None,
    )


@SLOW
def test_early_stopping_ends_the_run_after_patience_evaluations_without_improvement(
    tiny_voxtral, demo_speech, tmp_path
):
    data = features(demo_speech, tiny_voxtral, tmp_path / "cache")
    # No improvement can exceed 100 nats: the second evaluation already counts as one without improvement.
    results = train(tiny_voxtral, data, tmp_path / "run", eval_every_steps=1, early_stopping_patience=1,
                    early_stopping_min_delta=100.0, epochs=3)  # fmt: skip
    assert results["early_stopped"] and results["steps"] == 2
    (stop,) = read_events(tmp_path / "run", "early_stop")
    assert stop["values"]["best_step"] == 1 and "at step 1" in stop["values"]["reason"]
    losses = {e["step"]: e["values"]["val_loss"] for e in read_events(tmp_path / "run", "validation")}
    best = json.loads((tmp_path / "run" / "checkpoint_best.json").read_text())["step"]
    assert best == min(losses, key=losses.get)  # the best weights are the lowest loss's, min_delta or not


@SLOW
def test_a_streamed_run_trains_on_the_examples_of_an_in_memory_one_in_their_order(
    tiny_whisper, demo_speech, tmp_path
):
    loaded = load_pretrained(str(tiny_whisper))
    data = [featurize(demo_speech[split], loaded.feature_extractor, tmp_path / "cache", max_windows=1,
                      max_audio_sec=30, rows_per_shard=3).directory for split in ("train", "val")]  # fmt: skip
    values = {"method": "full", "max_steps": 4, "batch_size": 2, "learning_rate": 3e-3}
    results = [train(tiny_whisper, data, tmp_path / mode, streaming=mode == "streamed", **values)
               for mode in ("streamed", "in_memory")]  # fmt: skip
    weights = [
        load_finetuned(tmp_path / mode, "latest").model.state_dict() for mode in ("streamed", "in_memory")
    ]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert results[0]["best_val_loss"] == results[1]["best_val_loss"]
