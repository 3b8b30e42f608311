"""training.dry_run: one forward pass and loss on the first batch, per target token, with no gradient, no
step and nothing written; targets outside the vocabulary are refused before the model runs."""

from __future__ import annotations

import math

import pytest
import torch

from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.checkpoint import build_model_from_config
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.dry_run import dry_run
from asr_pipeline.training.loaders import build_data

from .conftest import tiny_config

ONE_RANK = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))


@pytest.fixture
def setup(corpus, tokenizer_path, tmp_path, keep_torch_threads):
    config = resolve_config(tiny_config(corpus, tokenizer_path, tmp_path / "run"))
    vocab_size = CTCTokenizer.from_file(tokenizer_path).vocab_size
    torch.manual_seed(0)
    model, _ = build_model_from_config(config, vocab_size)
    return config, model, build_data(config, ONE_RANK).train_loader, vocab_size


def test_the_first_batchs_loss_per_token_without_gradients_or_a_step(setup, tmp_path, capsys):
    config, model, loader, vocab_size = setup
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    values = dry_run(model, loader, config, ONE_RANK, vocab_size)

    first = next(iter(loader))
    assert (values["utterances"], values["tokens"]) == (len(first), int(first.target_lengths.sum()))
    assert math.isfinite(values["loss"]) and values["loss"] > 0
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())
    assert not (tmp_path / "run").exists()  # no run dir, no checkpoint
    assert "[train] dry run: loss" in capsys.readouterr().out


def test_targets_outside_the_vocabulary_are_refused_naming_the_likely_cause(setup):
    config, model, loader, _ = setup

    with pytest.raises(
        ValueError, match=r"outside the 3-entry vocabulary .* extracted with another tokenizer"
    ):
        dry_run(model, loader, config, ONE_RANK, vocab_size=3)
