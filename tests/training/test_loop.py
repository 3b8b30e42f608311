"""``training.loop``: ``train`` writes the run dir and its event log in order; the vocabulary size comes from the
tokenizer or the config (the Trainer it runs: tests/training/test_trainer*.py)."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.run_layout import METRICS_FILE
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.loop import vocab_size_of

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


def test_a_one_epoch_run_writes_its_metrics_checkpoint_and_events_in_order(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    config["optim"]["epochs"] = 1

    final = run(config)

    kinds = [event["type"] for event in events(tmp_path / "run")]
    # the kernels in force and the data report first, steps logged during the epoch, then its validation, the
    # epoch, the summary
    assert kinds[:2] == ["kernels", "data"] and kinds[-1] == "summary"
    kernels = events(tmp_path / "run", "kernels")[0]["values"]
    assert kernels == {"choice": "auto", "eager": [], "compiled": []}  # auto on the CPU: every reference
    assert kinds.index("train") < kinds.index("validation") < kinds.index("epoch") < kinds.index("summary")
    assert "lr_control" not in kinds and "grow" not in kinds  # no hook that was not asked for
    on_disk = json.loads((tmp_path / "run" / METRICS_FILE).read_text())
    assert on_disk == final and final["epochs"] == 1 and final["steps"] > 0
    assert final["train_loss"] > 0 and final["val_cer"] is not None
    assert (tmp_path / "run" / "checkpoint_latest").is_dir()


def test_the_vocabulary_size_is_the_tokenizers_or_the_configs_but_never_two_different_ones(
    corpus, tokenizer_path, tmp_path
):
    tokenizer = CTCTokenizer.from_file(tokenizer_path)
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    assert vocab_size_of(resolve_config(config), tokenizer) == tokenizer.vocab_size

    config["model"]["vocab_size"] = 7
    assert vocab_size_of(resolve_config(config), None) == 7
    with pytest.raises(
        ValueError, match=f"model.vocab_size=7 but the tokenizer .* has {tokenizer.vocab_size}"
    ):
        vocab_size_of(resolve_config(config), tokenizer)
