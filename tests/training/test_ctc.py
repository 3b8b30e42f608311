"""training.ctc: every output kind a spec can name has one objective, which the loop and validation ask for
losses, the empty-batch loss, what to decode and which scores to keep, instead of testing the kind."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.models.registry import SPECS, build_model
from asr_pipeline.training.ctc import OBJECTIVES, empty_batch_loss, objective_of
from asr_pipeline.training.validation import validation_metrics


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_registered_architecture_has_the_objective_of_its_output_kind(name):
    objective = objective_of(name)

    assert objective is OBJECTIVES[SPECS[name].output]
    assert validation_metrics(name) == objective.metrics


def test_text_objectives_score_cer_and_units_score_loss_and_accuracy():
    assert OBJECTIVES["ctc"].metrics == OBJECTIVES["paraformer"].metrics == ("val_cer", "val_wer")
    assert (
        OBJECTIVES["hubert"].metrics == ("val_loss", "val_accuracy") and not OBJECTIVES["hubert"].text_output
    )
    assert [name for name, objective in OBJECTIVES.items() if objective.frame_posteriors] == ["ctc"]
    assert [name for name, objective in OBJECTIVES.items() if objective.frame_labels_are_targets] == [
        "hubert"
    ]


@pytest.mark.parametrize("architecture", ["squeezeformer", "paraformer", "hubert-pretrain"])
def test_the_empty_batch_loss_is_zero_and_reaches_every_trained_parameter_head(architecture):
    input_dim = SPECS[architecture].input_dim
    model = build_model(architecture, "tiny", input_dim=input_dim, vocab_size=9)
    features, lengths = torch.randn(1, 40, input_dim), torch.tensor([40])

    loss = empty_batch_loss(model, features, lengths, architecture)
    loss.backward()

    assert loss.item() == 0.0 and loss.dim() == 0
    assert any(parameter.grad is not None for parameter in model.parameters())


# --- chunked frame-wise training (data.chunking) ---
def chunked_setup(chunk_frames: int = 32, chunk_step_frames: int | None = 16):
    """A tiny squeezeformer (eval: no dropout) and a batch of 3 utterances (100, 45, 20 frames) with random
    frame labels, one per output frame (ceil(T / 4))."""
    from asr_pipeline.data.collate import FRAME_LABEL_PAD, Batch
    from asr_pipeline.training.config import DataConfig, ModelConfig, TrainConfig

    torch.manual_seed(0)
    model = build_model("squeezeformer", "tiny", input_dim=80, vocab_size=9, dropout=0.0).eval()
    lengths = torch.tensor([100, 45, 20])
    label_counts = model.output_lengths(lengths)  # (B,) 25, 12, 5
    labels = torch.full((3, int(label_counts.max())), FRAME_LABEL_PAD)
    for row, count in enumerate(label_counts.tolist()):
        labels[row, :count] = torch.randint(0, 9, (count,))
    batch = Batch(
        features=torch.randn(3, 100, 80) * (torch.arange(100)[None, :, None] < lengths[:, None, None]),
        feature_lengths=lengths,
        targets=torch.ones(3, 6, dtype=torch.int64),
        target_lengths=torch.tensor([6, 4, 2]),
        ids=["a", "b", "c"],
        texts=["", "", ""],
        duration_ms=lengths * 10,
        frame_labels=labels,
    )
    data = DataConfig(
        train_manifests=[],
        alignment="alignment.parquet",
        chunk_frames=chunk_frames,
        chunk_step_frames=chunk_step_frames,
    )
    config = TrainConfig(data=data, model=ModelConfig(architecture="squeezeformer", variant="tiny"))
    return model, batch, config


def test_the_chunked_loss_of_an_utterance_is_the_sum_of_each_chunks_own_frame_wise_loss():
    from asr_pipeline.data.chunking import chunk_spans
    from asr_pipeline.training.ctc import chunked_framewise_losses

    model, batch, config = chunked_setup(chunk_frames=32, chunk_step_frames=16)

    step = chunked_framewise_losses(model, batch, config)

    for row, length in enumerate(batch.feature_lengths.tolist()):
        expected = 0.0
        for start, end in chunk_spans(length, 32, 16):  # each chunk forwarded alone, as its own sequence
            log_probs, _ = model(batch.features[row : row + 1, start:end], torch.tensor([end - start]))
            labels = batch.frame_labels[row, start // 4 : start // 4 + log_probs.size(1)]
            expected -= float(log_probs[0, torch.arange(labels.numel()), labels].sum().detach())
        assert float(step.losses[row].detach()) == pytest.approx(expected, rel=1e-4), batch.ids[row]
    # 100 frames: [0,32) [16,48) [32,64) [48,80) [64,96) [80,100), 5 x 8 + 5 of its 25 output frames;
    # 45: [0,32) [16,45), 8 + 8 of 12; 20: one chunk, 5 of 5.
    assert step.out_lengths.tolist() == [45, 16, 5]
    assert step.tokens.tolist() == pytest.approx([6 * 45 / 25, 4 * 16 / 12, 2.0]), "tokens x overlap"


def test_training_losses_are_chunked_and_validation_losses_are_not():
    from asr_pipeline.training.ctc import framewise_losses, model_losses

    model, batch, config = chunked_setup()

    whole = model_losses(model, batch, config)
    chunked = model_losses(model, batch, config, training=True)

    assert torch.equal(whole.losses, framewise_losses(model, batch, config)[0])
    assert chunked.tokens is not None and not torch.allclose(chunked.losses, whole.losses)
    chunked.losses.sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad), "every chunk trains"


def test_adjacent_chunks_count_every_label_once():
    from asr_pipeline.training.ctc import chunked_framewise_losses

    model, batch, config = chunked_setup(chunk_frames=32, chunk_step_frames=None)

    step = chunked_framewise_losses(model, batch, config)

    assert step.out_lengths.tolist() == [25, 12, 5]
    assert step.tokens.tolist() == [6, 4, 2]
