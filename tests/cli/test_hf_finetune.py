"""``asr-pipeline hf-finetune``: the stage's run outside DVC, its flags generated from the options' fields."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.cli import main
from tests.hf_finetune.conftest import save_tiny_voxtral, short_sentences, write_demo_utterances


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
