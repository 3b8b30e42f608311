"""training.cr_ctc: CR-CTC's loss on a tiny case against a hand computation, two views masked apart, the
consistency gradient reaching both views, the warmup of its weight, and the loop's step using it."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

from asr_pipeline.data.collate import Batch, collate_batch
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.cr_ctc import CRCTC, consistency_losses, two_views, views_augment

from .conftest import tiny_config
from .test_trainer_step import utterances

MINIMAL = {"data": {"train_manifests": ["unused.parquet"], "input_dim": 2}, "model": {"vocab_size": 2}}


class PosteriorsAsFeatures(nn.Module):
    """A "model" whose features are its frame logits (F = V): the test sets the posteriors by hand."""

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        return features.log_softmax(-1), lengths  # (B, T, V), (B,)


class SecondViewSharpensLastFrame:
    """A stand-in for the views' SpecAugment: rows of the second view get frame 1 = (0.9, 0.1)."""

    def batch(self, features: Tensor, lengths: Tensor) -> Tensor:
        views = features.clone()
        views[views.size(0) // 2 :, 1] = torch.tensor([0.9, 0.1]).log()
        return views


def one_utterance(frames: list[list[float]], target: list[int]) -> Batch:
    features = torch.tensor([frames]).log()  # (1, T, V): probabilities as logits of themselves
    return Batch(
        features=features,
        feature_lengths=torch.tensor([len(frames)]),
        targets=torch.tensor([target]),
        target_lengths=torch.tensor([len(target)]),
        ids=["u"],
        texts=[""],
        duration_ms=torch.tensor([20]),
    )


def test_the_loss_of_one_utterance_is_the_hand_computed_ctc_plus_the_weighted_consistency():
    config = resolve_config(
        MINIMAL, {"regularization.cr_ctc": True, "regularization.cr_loss_warmup_steps": 10}
    )
    cr = CRCTC(config)
    cr.augment = SecondViewSharpensLastFrame()  # type: ignore[assignment]
    batch = one_utterance([[0.25, 0.75], [0.5, 0.5]], target=[1])  # blank 0, token 1

    step = cr.losses(PosteriorsAsFeatures(), batch, config, step=5)

    # CTC of "1" over 2 frames: paths 1 1, 1 -, - 1 -> a1 b1 + a1 b0 + a0 b1.
    view1 = 0.75 * 0.5 + 0.75 * 0.5 + 0.25 * 0.5  # 0.875
    view2 = 0.75 * 0.1 + 0.75 * 0.9 + 0.25 * 0.1  # 0.775
    ctc = (-math.log(view1) - math.log(view2)) / 2
    # Frame 0 is the same in both views (KL 0); frame 1: (0.5, 0.5) against (0.9, 0.1), both ways.
    kl_2_from_1 = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)  # KL(sg(p2) || p1)
    kl_1_from_2 = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)  # KL(sg(p1) || p2)
    consistency = (kl_2_from_1 + kl_1_from_2) / 2
    weight = 0.2 * 5 / 10  # cr_loss_scale, halfway through the warmup
    torch.testing.assert_close(step.components["ctc"], torch.tensor([ctc]), rtol=1e-5, atol=0)
    torch.testing.assert_close(step.components["cr"], torch.tensor([consistency]), rtol=1e-5, atol=0)
    torch.testing.assert_close(step.losses, torch.tensor([ctc + weight * consistency]), rtol=1e-5, atol=0)
    assert step.log_probs is not None and step.log_probs.shape == (1, 2, 2)  # the first view's


def test_the_consistency_weight_rises_linearly_over_the_warmup_and_then_holds():
    config = resolve_config(
        MINIMAL, {"regularization.cr_ctc": True, "regularization.cr_loss_warmup_steps": 4}
    )
    cr = CRCTC(config)

    assert [cr.scale(step) for step in (0, 1, 4, 100)] == pytest.approx([0.0, 0.05, 0.2, 0.2])


def test_the_two_views_are_masked_independently_within_each_utterance():
    config = resolve_config(MINIMAL, {"regularization.cr_ctc": True})
    augment = views_augment(config.data, config.regularization)
    torch.manual_seed(0)
    batch = collate_batch(utterances(3, frames=200))
    batch.features[2, 150:] = 0.0
    batch.feature_lengths[2] = 150  # a shorter utterance: its padding stays as it was

    views = two_views(batch, augment)

    assert (augment.time_masks, augment.max_time_fraction) == (5, pytest.approx(0.375))  # 2 x 2.5 masks
    assert views.features.shape == (6, 200, batch.features.size(2))
    assert torch.equal(views.targets, batch.targets.repeat(2, 1)) and views.ids == batch.ids * 2
    for row in range(3):
        first, second = views.features[row], views.features[3 + row]
        assert not torch.equal(first, second), f"utterance {row}: both views drew the same masks"
        assert not torch.equal(first, batch.features[row]) and not torch.equal(second, batch.features[row])
    assert torch.equal(views.features[5, 150:], batch.features[2, 150:])


def test_each_view_gets_the_consistency_gradient_of_its_own_kl_term():
    log_probs = torch.randn(4, 3, 5).log_softmax(-1).requires_grad_()  # (2B, T', V), B = 2
    lengths = torch.tensor([3, 2, 3, 2])

    consistency_losses(log_probs, lengths).sum().backward()

    assert log_probs.grad is not None
    for row in range(4):  # both views of both utterances move, padded frames do not
        assert log_probs.grad[row, : lengths[row]].abs().sum() > 0, row
    assert torch.equal(log_probs.grad[1, 2:], torch.zeros(1, 5))
    # d KL(q || p) / d log p = -q, q the other view's (detached) posteriors
    others = torch.roll(log_probs.detach(), 2, dims=0).exp()
    torch.testing.assert_close(log_probs.grad[0], -others[0])


def test_cr_ctc_is_refused_for_a_model_that_is_not_trained_by_ctc():
    with pytest.raises(ValueError, match=r"regularization.cr_ctc .* paraformer is trained by paraformer"):
        resolve_config(MINIMAL, {"regularization.cr_ctc": True, "model.architecture": "paraformer"})
    with pytest.raises(ValueError, match=r"cr_time_mask_ratio=8\.0 would let the time masks cover 1\.20"):
        resolve_config(MINIMAL, {"regularization.cr_time_mask_ratio": 8.0})


def test_a_training_step_under_cr_ctc_logs_both_terms_and_the_loader_leaves_masking_to_it(
    corpus, tokenizer_path, tmp_path, keep_torch_threads
):
    from asr_pipeline.training.distributed import DistributedContext
    from asr_pipeline.training.events import EventLog
    from asr_pipeline.training.loaders import build_data
    from asr_pipeline.training.trainer import Trainer

    config_dict = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    config_dict["regularization"] = {"cr_ctc": True, "cr_loss_warmup_steps": 0}
    config = resolve_config(config_dict)
    ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    data = build_data(config, ctx)
    vocab_size = CTCTokenizer.from_file(tokenizer_path).vocab_size
    trainer = Trainer(
        config, ctx, data, vocab_size, EventLog(tmp_path / "e.jsonl", enabled=False, append=False)
    )

    assert data.train_loader.dataset.transform is None  # type: ignore[attr-defined]
    trainer.backward(next(iter(data.train_loader)), window_size=1, last_micro=True)

    # the terms' sums and then their tokens, on the device until the log reads them
    assert set(trainer.component_names) == {"ctc", "cr"} and trainer.component_sums is not None
    sums = dict(zip(trainer.component_names, trainer.component_sums.tolist(), strict=False))
    assert sums["cr"] > 0 and trainer.component_sums[-1] > 0
    assert all(p.grad is not None for p in trainer.model.parameters() if p.requires_grad)
