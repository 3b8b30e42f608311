"""Training straight from a raw JSONL manifest of audio: features computed on the fly, bad audio skipped
and counted, waveform augmentation reproducible; and the loader options and batching report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from asr_pipeline.io.report import NothingKeptError
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.launch import torchrun_command
from asr_pipeline.training.loaders import build_data
from tests.conftest import make_wav
from tests.factories import random_sentences

from .conftest import events, run_in_process, tiny_config


def values(run_dir: Path, kind: str) -> list[dict]:
    return [event["values"] for event in events(run_dir, kind)]


pytestmark = pytest.mark.usefixtures("single_process")
SINGLE = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))


def write_audio_manifest(folder: Path, name: str, count: int, seed: int, broken: bool) -> Path:
    """``count`` tones of 0.6..1.2 s (16 and 22.05 kHz) transcribed with random words; with ``broken``,
    also one missing file (skipped while indexing) and one truncated WAV (its header reads fine, so it is
    only found, and skipped, when a loader decodes it)."""
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for i, text in enumerate(random_sentences(count, seed)):
        rate = 16000 if i % 2 else 22050
        (folder / f"{name}{i}.wav").write_bytes(make_wav(0.6 + 0.05 * (i % 13), rate, freq=150.0 + 40 * i))
        records.append({"id": f"{name}-{i:02d}", "audio_path": f"{name}{i}.wav", "text": text})
    if broken:
        wav = make_wav(1.0, 16000)
        (folder / "truncated.wav").write_bytes(wav[: len(wav) // 2])
        records.append({"id": f"{name}-truncated", "audio_path": "truncated.wav", "text": "ab"})
        records.append({"id": f"{name}-missing", "audio_path": "missing.wav", "text": "ab"})
    manifest = folder / f"{name}.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records))
    return manifest


@pytest.fixture(scope="module")
def audio_corpus(tmp_path_factory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("audio")
    return {
        "train": [str(write_audio_manifest(root, "train", 14, seed=1, broken=True))],
        "val": [str(write_audio_manifest(root, "val", 4, seed=2, broken=False))],
    }


def raw_config(audio_corpus, tokenizer_path: Path, output_dir: Path, **data) -> dict:
    config = tiny_config(audio_corpus, tokenizer_path, output_dir)
    config["data"] |= {"input_dim": 80, "adaptive_batch_budget": 500, **data}
    config["optim"]["epochs"] = 2
    return config


def test_a_tiny_run_trains_on_a_jsonl_manifest_of_audio_and_counts_the_bad_files(
    audio_corpus, tokenizer_path, tmp_path
):
    config = raw_config(
        audio_corpus,
        tokenizer_path,
        tmp_path,
        waveform_gain_min_db=-6.0,
        waveform_gain_max_db=3.0,
        waveform_noise_std=0.002,
    )

    metrics = run_in_process(config)

    [data] = values(tmp_path, "data")
    assert data["train"]["kind"] == "raw" and data["val"]["kind"] == "raw"
    assert data["train"]["skipped_by_reason"] == {"missing file": 1}, "the missing file, at indexing"
    assert data["train"]["selection"]["available"] == 15  # 14 tones + the truncated one
    assert data["train"]["selection"]["skipped"] == 1
    assert data["val"]["examples"] == 4
    epochs = values(tmp_path, "epoch")
    assert [e["skipped_examples"] for e in epochs] == [1, 1], "the truncated WAV, once per epoch"
    assert metrics["steps"] > 0 and metrics["train_loss"] is not None
    [validation, *_] = values(tmp_path, "validation")
    assert validation["utterances"] == 4


def test_raw_manifest_runs_are_reproducible_whatever_the_number_of_workers(
    audio_corpus, tokenizer_path, tmp_path
):
    augment = {"waveform_gain_min_db": -6.0, "waveform_gain_max_db": 6.0, "waveform_noise_std": 0.01}
    in_process = raw_config(audio_corpus, tokenizer_path, tmp_path / "a", **augment)
    in_workers = raw_config(
        audio_corpus, tokenizer_path, tmp_path / "b", num_workers=2, prefetch_factor=1, **augment
    )
    for config in (in_process, in_workers):
        config["optim"]["epochs"] = 1
        config["data"]["val_manifests"] = []
        run_in_process(config)

    digests = [values(tmp_path / run, "summary")[0]["parameter_digests"] for run in ("a", "b")]
    assert digests[0] == digests[1]


def test_waveform_augmentation_on_feature_shards_is_refused(corpus, tokenizer_path, tmp_path):
    config_dict = tiny_config(corpus, tokenizer_path, tmp_path)
    config_dict["data"]["waveform_noise_std"] = 0.01
    config = resolve_config(config_dict)

    with pytest.raises(ValueError, match=r"waveform augmentation .* needs raw audio manifests"):
        build_data(config, SINGLE)


def test_the_data_report_counts_examples_over_the_budget_and_the_padding(corpus, tokenizer_path, tmp_path):
    config_dict = tiny_config(corpus, tokenizer_path, tmp_path)
    config_dict["data"] |= {"adaptive_batch_budget": 100, "adaptive_batch_unit": "frames"}  # 60..120 frames
    data = build_data(resolve_config(config_dict), SINGLE)

    batching = data.report["batching"]
    lengths = data.train_sampler.lengths
    assert batching["unit"] == "frames" and batching["budget"] == 100
    assert batching["oversized_examples"] == int((lengths > 100).sum()) > 0
    assert batching["epoch0"]["oversized_batches"] == batching["oversized_examples"]
    assert batching["epoch0"]["examples"] == 16 and 0 < batching["epoch0"]["padding_efficiency"] <= 1
    assert data.report["loader"] == {
        "num_workers": 0,
        "prefetch_factor": None,
        "persistent_workers": False,
        "pin_memory": False,
    }


def test_pin_memory_is_turned_off_with_a_warning_without_cuda(corpus, tokenizer_path, tmp_path, caplog):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: pinning is honoured")
    config_dict = tiny_config(corpus, tokenizer_path, tmp_path)
    config_dict["data"]["pin_memory"] = True

    data = build_data(resolve_config(config_dict), SINGLE)

    assert data.report["loader"]["pin_memory"] is False
    assert "CUDA is not available" in caplog.text


def test_a_batch_with_only_undecodable_audio_on_one_rank_does_not_hang_ddp(tokenizer_path, tmp_path):
    manifest = write_audio_manifest(tmp_path / "audio", "train", 5, seed=3, broken=True)
    config = raw_config({"train": [str(manifest)], "val": []}, tokenizer_path, tmp_path / "run")
    config["data"] |= {"batch_size": 1}  # the truncated WAV is a batch of its own: empty after collate
    config["optim"]["epochs"] = 1
    config_path = tmp_path / "training_config.json"
    save_json(resolve_config(config), config_path)

    # A hang would sit in gloo's all-reduce for its 30-minute default; fail well before that.
    subprocess.run(torchrun_command(config_path, 2), check=True, timeout=300, cwd=Path(__file__).parents[2])

    [epoch] = values(tmp_path / "run", "epoch")
    summary = values(tmp_path / "run", "summary")[0]
    assert epoch["skipped_examples"] == 1
    assert summary["parameter_digests"][0] == summary["parameter_digests"][1]


def only_broken_audio(folder: Path, content: bytes) -> dict[str, list[str]]:
    """A training manifest of one file, ``content`` (a truncated WAV, or not audio at all), and no validation."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "broken.wav").write_bytes(content)
    manifest = folder / "train.jsonl"
    manifest.write_text(json.dumps({"id": "broken", "audio_path": "broken.wav", "text": "ab"}) + "\n")
    return {"train": [str(manifest)], "val": []}


TRUNCATED_WAV = make_wav(1.0, 16000)[:16000]  # the header declares 1 s; half of it is there


@pytest.mark.parametrize("dry_run", [False, True], ids=["train", "dry-run"])
def test_a_run_whose_every_example_is_skipped_fails_naming_the_files_and_writes_no_checkpoint(
    dry_run, tokenizer_path, tmp_path
):
    corpus = only_broken_audio(
        tmp_path / "audio", TRUNCATED_WAV
    )  # passes the header check: skipped in the loader
    config = raw_config(corpus, tokenizer_path, tmp_path / "run", batch_size=1)
    config["run"]["dry_run"] = dry_run

    with pytest.raises(NothingKeptError) as error:
        run_in_process(config)

    what = "the dry run's epoch" if dry_run else "epoch 1"
    assert str(error.value).startswith(f"training: all 1 examples of {what} were skipped")
    assert f"{corpus['train'][0]}:1: truncated audio" in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "run" / "checkpoint_latest.json").exists()


def test_training_manifests_that_keep_no_example_name_the_skipped_files(tokenizer_path, tmp_path):
    corpus = only_broken_audio(tmp_path / "audio", b"not audio at all" * 8)  # refused by the header check
    config = resolve_config(raw_config(corpus, tokenizer_path, tmp_path / "run"))

    with pytest.raises(NothingKeptError, match="no training examples left of 0") as error:
        build_data(config, SINGLE)

    assert f"first: {corpus['train'][0]}:1: " in str(error.value)  # and the reason io.audio gives


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"waveform_gain_min_db": 3.0, "waveform_gain_max_db": -3.0}, "waveform_gain_min_db=3.0 is above"),
        ({"waveform_noise_std": -0.1}, "waveform_noise_std must be >= 0"),
        ({"prefetch_factor": 4}, "prefetch_factor=4 needs num_workers > 0"),
        ({"adaptive_batch_unit": "tokens"}, "adaptive_batch_unit: expected one of"),
    ],
)
def test_bad_data_options_are_refused_saying_what_to_change(values, message):
    with pytest.raises(ValueError, match=message):
        resolve_config(
            {
                "data": {"train_manifests": ["a.jsonl"], **values},
                "optim": {"epochs": 1, "lr_warmup_steps": 0},
                "run": {"output_dir": "run"},
            }
        )


def test_a_run_saved_before_the_new_data_options_still_resumes_with_their_defaults(
    corpus, tokenizer_path, tmp_path
):
    from asr_pipeline.training.config import to_dict
    from asr_pipeline.training.resume import critical_keys

    current = to_dict(resolve_config(tiny_config(corpus, tokenizer_path, tmp_path)))
    older = {**current, "data": dict(current["data"])}
    for name in ("adaptive_batch_unit", "sort_by_length_desc", "waveform_gain_min_db", "waveform_noise_std"):
        del older["data"][name]

    assert critical_keys(older) == critical_keys(current)
    changed = {**current, "data": {**current["data"], "adaptive_batch_unit": "frames"}}
    assert critical_keys(changed) != critical_keys(current)
