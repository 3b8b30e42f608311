"""``train.schedule`` and ``train.curriculum`` in real runs: each scheduled value is in effect in the epochs
named and not outside (clipping, dropout, SpecAugment in a loader worker), curriculum epochs batch only the
short utterances, and a run with a schedule, a curriculum and Newbob killed mid-run and resumed ends like
the uninterrupted one."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
from torch import nn

from asr_pipeline.data.collate import Batch
from asr_pipeline.io.shards import iter_examples
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.loaders import build_data
from asr_pipeline.training.trainer import Trainer
from asr_pipeline.training.worker import FAIL_RANK_ENV, FAIL_STEP_ENV

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


def test_clipping_and_dropout_follow_the_schedule_epoch_by_epoch(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    seen: dict[int, list[tuple[float, set[float]]]] = defaultdict(
        list
    )  # epoch -> (clip, dropout p's) per step
    clip_norm = torch.nn.utils.clip_grad_norm_
    original = Trainer.optimizer_step

    def recording_clip(parameters, max_norm, *args, **kwargs):
        recording_clip.max_norm = max_norm
        return clip_norm(parameters, max_norm, *args, **kwargs)

    def recording_step(self):
        applied = original(self)
        rates = {module.p for module in self.model.modules() if isinstance(module, nn.Dropout)}
        seen[self.epoch].append((recording_clip.max_norm, rates))
        return applied

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    monkeypatch.setattr(Trainer, "optimizer_step", recording_step)
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"] |= {"epochs": 3, "gradient_clip_norm": 5.0}
    config["model"]["dropout"] = 0.2
    config["schedule"] = [
        {"epochs": 2, "values": {"optim.gradient_clip_norm": 0.5}},
        {"epochs": "2-", "values": {"model.dropout": 0.0}},
    ]

    run(config)

    assert {clip for clip, _ in seen[0]} == {5.0} and {clip for clip, _ in seen[2]} == {5.0}
    assert {clip for clip, _ in seen[1]} == {0.5}
    assert all(rates == {0.2} for _, rates in seen[0]), "epoch 1: the model's own dropout"
    assert all(rates == {0.0} for epoch in (1, 2) for _, rates in seen[epoch])
    logged = [(e["epoch"], e["values"]) for e in events(tmp_path, "schedule")]
    assert logged == [
        (0, {"optim.gradient_clip_norm": 5.0, "model.dropout": 0.2}),
        (1, {"optim.gradient_clip_norm": 0.5, "model.dropout": 0.0}),
        (2, {"optim.gradient_clip_norm": 5.0, "model.dropout": 0.0}),
    ]


def test_spec_augment_follows_the_schedule_in_a_persistent_loader_worker(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["data"] |= {"num_workers": 1, "spec_time_masks": 4, "spec_time_mask_max_frames": 30}
    config["optim"]["epochs"] = 2
    config["schedule"] = [{"epochs": 1, "values": {"data.spec_time_masks": 0, "data.spec_freq_masks": 0}}]
    resolved = resolve_config(config)
    ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    data = build_data(resolved, ctx)
    clean = {
        row["id"]: torch.tensor(row["features"]) for path in corpus["train"] for row in iter_examples(path)
    }

    def masked_share(epoch: int) -> float:
        data.train_sampler.set_epoch(epoch)
        changed = total = 0
        for batch in data.train_loader:
            assert isinstance(batch, Batch)
            for i, utterance in enumerate(batch.ids):
                frames = int(batch.feature_lengths[i])
                changed += int((batch.features[i, :frames] != clean[utterance]).any())
                total += 1
        return changed / total

    assert masked_share(0) == 0.0, "epoch 1: no masks, the features as stored"
    assert masked_share(1) > 0.5, "epoch 2: the config's masks"


def test_curriculum_epochs_batch_only_the_short_utterances(corpus, tokenizer_path, tmp_path, monkeypatch):
    durations = {row["id"]: row["duration_ms"] for path in corpus["train"] for row in iter_examples(path)}
    seen: dict[int, list[str]] = defaultdict(list)
    original = Trainer.backward

    def recording_backward(self, batch, window_size, last_micro):
        seen[self.epoch].extend(batch.ids)
        return original(self, batch, window_size, last_micro)

    monkeypatch.setattr(Trainer, "backward", recording_backward)
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 3
    config["curriculum"] = {"epochs": 2, "max_duration_sec": 0.9, "sort_by_length": True}

    run(config)

    short = {utterance for utterance, ms in durations.items() if ms <= 900}
    assert 0 < len(short) < len(durations)
    for epoch in (0, 1):
        assert set(seen[epoch]) <= short and len(set(seen[epoch])) >= len(short) - 8, f"epoch {epoch + 1}"
        assert [durations[u] for u in seen[epoch]] == sorted(durations[u] for u in seen[epoch]), "ascending"
    assert set(seen[2]) - short, "epoch 3 uses the long ones too"


def test_a_run_with_schedule_curriculum_and_newbob_killed_and_resumed_ends_like_the_uninterrupted_one(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    def config_for(run_dir):
        config = tiny_config(corpus, tokenizer_path, run_dir, checkpoint_every_steps=1)
        config["optim"] |= {"epochs": 4, "lr_control": "newbob", "newbob": {"threshold": 1e6}}
        config["schedule"] = [
            {"epochs": "1-2", "values": {"optim.gradient_clip_norm": 0.5, "data.spec_time_masks": 0}},
            {"epochs": "3-", "values": {"data.adaptive_batch_budget": 720}},
        ]
        config["curriculum"] = {"epochs": 1, "shortest_fraction": 0.5}
        return config

    straight = tmp_path / "straight"
    run(config_for(straight))
    steps = [e["values"]["steps"] for e in events(straight, "epoch")]
    kill_at = steps[1] + 1  # inside epoch 3: past the curriculum, a Newbob decision and a budget change

    killed = tmp_path / "killed"
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, str(kill_at))
    with pytest.raises(RuntimeError, match="fault injected"):
        run(config_for(killed))
    monkeypatch.delenv(FAIL_RANK_ENV)
    resumed = config_for(killed)
    resumed["run"]["resume_from"] = str(killed)
    run(resumed)

    def summary(run_dir):
        return events(run_dir, "summary")[-1]["values"]

    assert summary(killed)["steps"] == summary(straight)["steps"]
    assert summary(killed)["parameter_digests"] == summary(straight)["parameter_digests"]
    assert [e["values"] for e in events(killed, "schedule")][-2:] == [
        e["values"] for e in events(straight, "schedule")
    ][-2:]
