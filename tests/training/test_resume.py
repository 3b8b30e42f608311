"""training.resume: which config keys are training-critical (absent ones count as their default; epochs and
early stopping may change), a resume refused with an old -> new diff, and init-from copying the tensors that
fit and reporting the rest."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from asr_pipeline.run_layout import CONFIG_FILE
from asr_pipeline.training.config import resolve_config, to_dict
from asr_pipeline.training.resume import check_resume_compatible, critical_keys, init_from_weights
from tests.factories import untrained_run


def saved_config(**sections) -> dict:
    """A config dict as a run saves it (JSON-shaped)."""
    return json.loads(
        json.dumps(to_dict(resolve_config({"data": {"train_manifests": ["t.parquet"]}, **sections})))
    )


def test_epochs_and_early_stopping_may_change_but_the_learning_rate_may_not():
    keys = critical_keys(saved_config(optim={"epochs": 3, "learning_rate": 1e-3}))
    assert "optim.epochs" not in keys and "optim.early_stopping_patience" not in keys
    assert keys["optim.learning_rate"] == 1e-3
    assert keys["data.train_manifests"] == ["t.parquet"] and "run.seed" in keys


def test_a_data_key_a_saved_config_predates_counts_as_its_default():
    config = saved_config()
    full = critical_keys(config)
    del config["data"]["sort_buffer_size"]
    assert critical_keys(config) == full


def test_a_resume_with_a_changed_critical_key_is_refused_naming_old_and_new(tmp_path):
    run_dir = untrained_run(tmp_path)
    saved = json.loads((run_dir / CONFIG_FILE).read_text())
    model_config = json.loads((run_dir / "checkpoint_latest.json").read_text())["model_config"]
    same = resolve_config(saved)
    check_resume_compatible(same, model_config, run_dir)  # nothing changed: accepted
    longer = resolve_config({**saved, "optim": {**saved["optim"], "epochs": saved["optim"]["epochs"] + 5}})
    check_resume_compatible(longer, model_config, run_dir)
    changed = resolve_config({**saved, "optim": {**saved["optim"], "learning_rate": 0.5}})
    with pytest.raises(ValueError, match=r"optim.learning_rate: .* -> 0.5"):
        check_resume_compatible(changed, model_config, run_dir)
    with pytest.raises(ValueError, match=r"resolved model config vocab_size: .* -> 999"):
        check_resume_compatible(same, {**model_config, "vocab_size": 999}, run_dir)


def test_init_from_copies_matching_tensors_and_reports_the_others(tmp_path):
    source = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 3))
    path = tmp_path / "weights.safetensors"
    save_file({**{k: v.contiguous() for k, v in source.state_dict().items()}, "extra": torch.zeros(1)}, path)
    target = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 5))  # a new output size
    report = init_from_weights(target, path, verbose=False)
    torch.testing.assert_close(target[0].weight, source[0].weight)
    assert report["loaded"] == 2
    assert report["skipped"] == {
        "1.weight": "[3, 8] -> [5, 8]",
        "1.bias": "[3] -> [5]",
        "extra": "not in the model",
    }
    assert report["not_in_source"] == []


def test_init_from_adapters_only_is_refused_with_what_to_start_from(tmp_path):
    path = tmp_path / "adapters.safetensors"
    save_file({"encoder.q.lora_A.default.weight": torch.zeros(2, 4)}, path)
    with pytest.raises(ValueError, match=r"holds LoRA adapters only .* merged"):
        init_from_weights(torch.nn.Linear(4, 4), path, verbose=False)
