"""``asr-pipeline hf-finetune``: the stage's run outside DVC, its flags generated from the options' fields."""

from __future__ import annotations

import json

import pytest
import torch

from asr_pipeline.cli import main
from asr_pipeline.hf_finetune.export import load_finetuned
from asr_pipeline.training.distributed import FAIL_RANK_ENV, FAIL_STEP_ENV
from asr_pipeline.training.events import read_events
from tests.hf_finetune.conftest import (
    save_tiny_voxtral,
    save_tiny_whisper,
    short_sentences,
    write_demo_utterances,
)


def test_the_model_is_required_and_evaluate_takes_split_equals_manifest(tmp_path, capsys):
    assert main(["hf-finetune", "--train", "t.jsonl", "--output-dir", str(tmp_path / "o")]) != 0
    assert "--model is required" in capsys.readouterr().err
    assert (
        main(["hf-finetune", "--train", "t", "--output-dir", "o", "--model", "m", "--evaluate", "dev"]) != 0
    )
    assert "expected SPLIT=MANIFEST" in capsys.readouterr().err


@pytest.mark.slow
def test_a_lora_fine_tune_from_the_command_line_writes_scores_and_an_export(tmp_path, capsys):
    texts = short_sentences(8)
    train = write_demo_utterances(tmp_path, texts[:6], "train", seed=1)
    val = write_demo_utterances(tmp_path, texts[6:], "val", seed=2)
    model = save_tiny_voxtral(tmp_path / "voxtral", texts)
    out = tmp_path / "out"
    argv = ["hf-finetune", "--train", str(train), "--val", str(val), "--evaluate", f"dev={val}", "--output-dir",
            str(out), "--model", str(model), "--lora-rank", "2", "--max-steps", "2", "--batch-size", "3",
            "--max-new-tokens", "4", "--no-grad-ckpt"]  # fmt: skip
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["steps"] == 2 and set(printed["splits"]["dev"]) >= {"wer_before", "wer_after"}
    saved = json.loads((out / "run" / "training_config.json").read_text())
    assert (saved["lora_rank"], saved["max_steps"], saved["gradient_checkpointing"]) == (2, 2, False)
    assert (out / "export" / "config.json").is_file() and (out / "metrics.json").is_file()


@pytest.mark.slow
def test_a_fine_tune_killed_after_a_checkpoint_and_resumed_ends_with_the_uninterrupted_weights(
    tmp_path, capsys, monkeypatch
):
    texts = short_sentences(8)
    train = write_demo_utterances(tmp_path, texts[:6], "train", seed=1)
    val = write_demo_utterances(tmp_path, texts[6:], "val", seed=2)
    model = save_tiny_whisper(tmp_path / "whisper", texts)

    def argv(out, *more):
        return ["hf-finetune", "--train", str(train), "--val", str(val), "--output-dir", str(out), "--model",
                str(model), "--lora-rank", "2", "--lora-dropout", "0.3", "--learning-rate", "1e-2",
                "--max-steps", "4", "--batch-size", "2", "--warmup-steps", "1", "--save-every-steps", "1",
                "--eval-every-steps", "2", *more]  # fmt: skip

    assert main(argv(tmp_path / "straight")) == 0
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, "2")
    with pytest.raises(RuntimeError, match="fault injected"):
        main(argv(tmp_path / "resumed"))
    assert json.loads((tmp_path / "resumed" / "run" / "checkpoint_latest.json").read_text())["step"] == 2
    monkeypatch.delenv(FAIL_RANK_ENV)
    assert main(argv(tmp_path / "resumed", "--resume-from", str(tmp_path / "resumed" / "run"))) == 0
    capsys.readouterr()
    weights = [
        load_finetuned(tmp_path / run / "run", "latest", merge=False).model.state_dict()
        for run in ("straight", "resumed")
    ]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    losses = [[e["values"]["val_loss"] for e in read_events(tmp_path / run / "run", "validation")]
              for run in ("straight", "resumed")]  # fmt: skip
    assert len(losses[0]) == 3 and losses[0] == losses[1]  # steps 2 and 4, and 3 (the end of epoch 0)


def test_resuming_from_a_folder_without_a_checkpoint_is_one_line_naming_the_flag(tmp_path, capsys):
    argv = ["hf-finetune", "--train", "t.jsonl", "--output-dir", str(tmp_path / "o"), "--model", "m",
            "--resume-from", str(tmp_path / "nothing")]  # fmt: skip
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert "resume_from (--resume-from)" in error and "holds no finished checkpoint" in error


def test_a_condition_names_an_evaluate_split(tmp_path, capsys):
    argv = ["hf-finetune", "--train", "t.jsonl", "--output-dir", str(tmp_path / "o"), "--model", "m",
            "--evaluate", "test=t.jsonl", "--condition", "test_noisy=noisy"]  # fmt: skip
    assert main(argv) == 1
    assert "expected SPLIT=CONDITION with SPLIT one of --evaluate's (test)" in capsys.readouterr().err


def test_a_condition_with_a_missing_params_file_is_one_line_naming_it(tmp_path, capsys):
    argv = ["hf-finetune", "--train", "t.jsonl", "--output-dir", str(tmp_path / "o"), "--model", "m",
            "--evaluate", "test=t.jsonl", "--condition", "test=noisy",
            "--params", str(tmp_path / "none.yaml")]  # fmt: skip
    assert main(argv) == 1
    assert "none.yaml: no such parameters file" in capsys.readouterr().err
