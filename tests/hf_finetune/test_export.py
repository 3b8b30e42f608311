"""hf_finetune.export: the model card states the base model, the method and the scores before and after; a
run folder is recognised by its options; an export never replaces a folder that is not an earlier export.
(A whole export of a tiny fine-tuned Whisper: tests/hf_finetune/test_trainer.py.)"""

from __future__ import annotations

import pytest

from asr_pipeline.hf_finetune.export import export_finetuned, model_card
from asr_pipeline.run_layout import CARD_FILE

OPTIONS = {
    "model": "models/whisper-tiny",
    "method": "lora",
    "lora_rank": 8,
    "lora_alpha": 16,
    "learning_rate": 1e-4,
}
TRAIN = {
    "steps": 40,
    "best_val_loss": 1.23456,
    "best_val_perplexity": 3.43,
    "trainable_params": 10,
    "total_params": 100,
}


def test_the_card_names_the_base_model_method_and_training_in_its_header_and_text():
    card = model_card(OPTIONS, TRAIN, None)

    assert card.startswith("---\nlibrary_name: transformers\nbase_model: models/whisper-tiny\n")
    assert "# Fine-tuned whisper-tiny" in card
    assert "method **lora** (LoRA r=8, alpha=16), learning rate 0.0001, 40 steps." in card
    assert "Best validation loss 1.2346 (perplexity 3.430); 10 of 100 parameters trained." in card
    assert "| split |" not in card, "no evaluation, no table"


def test_the_card_tables_each_splits_scores_before_and_after_and_dashes_what_is_missing():
    evaluation = {"dev": {"before": {"wer": 0.5, "cer": 0.3}, "after": {"wer": 0.2, "cer": 0.1, "utterances": 7}},
                  "test": {"after": {"wer": 0.25}}}  # fmt: skip

    card = model_card({**OPTIONS, "method": "full"}, TRAIN, evaluation)

    assert "method **full**, learning rate" in card, "no LoRA sizes for a full fine-tune"
    assert "| dev | 0.5 | 0.2 | 0.3 | 0.1 | 7 |" in card
    assert "| test | - | 0.25 | - | - | - |" in card


@pytest.mark.parametrize("overwrite", [False, True])
def test_an_existing_folder_that_is_not_an_earlier_export_is_never_replaced(tmp_path, overwrite):
    output = tmp_path / "export"
    output.mkdir()
    (output / CARD_FILE).write_text("# notes\n")  # a card alone: not an export (no CONFIG_FILE)

    with pytest.raises(FileExistsError, match="pick a new folder, or pass --overwrite"):
        export_finetuned(tmp_path / "run", output, overwrite=overwrite)
    assert (output / CARD_FILE).read_text() == "# notes\n"
