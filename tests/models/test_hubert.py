"""HuBERT (models.hubert): the recipe's span masking, the pretraining loss and the CTC head's shapes (torchaudio's
and Hugging Face's models loading into ours: test_hubert_import.py)."""

from __future__ import annotations

import torch

from asr_kernels.masks import padding_mask
from asr_pipeline.models.hubert import (
    HubertConfig,
    HubertCTC,
    HubertPretrain,
    conv_output_lengths,
    hubert_config,
)

NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}


def waveform_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(3, 50, 320) waveform frames (1 s) and (3,) frame counts: one full row and two padded ones."""
    generator = torch.Generator().manual_seed(seed)
    frames = torch.randn(3, 50, 320, generator=generator)
    lengths = torch.tensor([50, 40, 25])
    return frames * ~padding_mask(lengths, 50)[..., None], lengths


def test_the_conv_stack_turns_samples_into_50_hz_frames():
    config = HubertConfig()  # base: (512, 10, 5) then 3-2 x4 and 2-2 x2
    # 16000 samples: (16000-10)//5+1 = 3199 -> 1599 -> 799 -> 399 -> 199 -> 99 -> 49
    assert conv_output_lengths(config, torch.tensor([16000, 400, 399, 0])).tolist() == [49, 1, 0, 0]
    assert config.stride == 320


def test_pretraining_learns_the_units_of_a_tiny_batch():
    torch.manual_seed(0)
    model = HubertPretrain(hubert_config("tiny", **NO_DROPOUT, num_classes=5))
    frames, lengths = waveform_batch()
    labels = (torch.arange(49) // 10 % 5).repeat(3, 1)  # (3, 49) five units in runs
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, accuracies = [], []
    for _ in range(60):
        out = model(frames, lengths, labels)
        loss = out["loss"].sum() / out["predicted_frames"].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        accuracies.append(float(out["correct_masked"].sum() / out["masked_frames"].sum()))
    assert losses[-1] < 0.3 * losses[0]
    # Masked frames are predicted from their context: over the last 10 steps' random masks 0.53-0.63 for seeds
    # 0-7 (one step's masks alone swing 0.4-0.85), against 1 in 5 by chance.
    assert sum(accuracies[-10:]) / 10 > 0.45


def test_the_feature_gradient_is_scaled():
    grads = []
    for mult in (1.0, 0.1):
        torch.manual_seed(0)
        model = HubertPretrain(
            hubert_config("tiny", **NO_DROPOUT, feature_grad_mult=mult, feature_penalty_weight=0.0)
        )
        frames, lengths = waveform_batch()
        mask = ~padding_mask(torch.tensor([49, 39, 24]), 49)
        model(frames, lengths, torch.zeros(3, 49, dtype=torch.long), mask=mask)["loss"].sum().backward()
        grads.append(model.hubert.feature_extractor.conv_layers[0].conv.weight.grad.clone())
    torch.testing.assert_close(grads[1], grads[0] * 0.1)


def test_the_ctc_head_masks_only_in_training():
    torch.manual_seed(0)
    model = HubertCTC(hubert_config("tiny", vocab_size=7, mask_prob=0.5))
    frames, lengths = waveform_batch()
    model.eval()
    with torch.no_grad():
        first, out_lengths = model(frames, lengths)
        second, _ = model(frames, lengths)
    assert first.shape == (3, 49, 7) and out_lengths.tolist() == [49, 39, 24]
    assert torch.equal(first, second)
