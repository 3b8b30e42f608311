"""SpeechAligner (models.speech_aligner): the reference's sizes, three heads at the feature frame rate, outputs that
do not depend on the padding of a batch, and a CTC head that learns a tiny batch."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.models.registry import get_spec
from asr_pipeline.models.speech_aligner import SpeechAligner, SpeechAlignerConfig, speech_aligner_config
from asr_pipeline.models.speech_aligner_spec import SIZES
from asr_pipeline.text.phones import NUM_CLASSES


def parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_the_default_size_is_the_references_and_the_variants_grow():
    sizes = {
        variant: parameters(SpeechAligner(speech_aligner_config(variant)))
        for variant in ("tiny", "default", "large")
    }
    # 39->64->128->256->512 convolutions (k=3, 1x1 residuals, SE) + 512-wide attention + heads: the reference's
    # "about 1.7M" is 1.88M here (its exact head and gate sizes are not published).
    assert 1_700_000 <= sizes["default"] <= 1_950_000
    assert sizes["tiny"] < 50_000 < sizes["default"] < sizes["large"]
    assert get_spec("speech-aligner").config_for(None, {}) == speech_aligner_config("default")


@pytest.mark.parametrize(
    ("variant", "channels", "num_heads", "count"),
    [
        ("tiny", (16, 24, 32, 32), 2, 19_659),
        ("default", (64, 128, 256, 512), 4, 1_885_323),
        ("large", (128, 256, 512, 768), 8, 4_919_459),
        # the reference trainer's presets under their own names: tiny 16/32/64/128 with 2 heads, large up to
        # 1024 channels with 16 heads
        ("reference-tiny", (16, 32, 64, 128), 2, 129_507),
        ("reference-large", (128, 256, 512, 1024), 16, 7_418_051),
    ],
)
def test_each_named_size_builds_with_its_widths_heads_and_parameter_count(
    variant, channels, num_heads, count
):
    config = get_spec("speech-aligner").config_for(variant, {})
    model = SpeechAligner(config).eval()
    features, lengths = torch.randn(2, 19, 39), torch.tensor([19, 11])

    with torch.no_grad():
        log_probs, out_lengths = model(features, lengths)
        hidden, _ = model.encode(features, lengths)

    assert (config.channels, config.num_heads) == (channels, num_heads)
    assert [block.conv.out_channels for block in model.blocks] == list(channels)
    assert model.attention.attention.num_heads == num_heads
    assert parameters(model) == count
    # no subsampling: T frames in, T frames out; the attention width is the last conv width
    assert hidden.shape == (2, 19, channels[-1])
    assert log_probs.shape == (2, 19, NUM_CLASSES) and out_lengths.tolist() == [19, 11]


def test_the_spec_holds_the_one_size_table_and_no_variant_is_the_dataclass_default():
    assert get_spec("speech-aligner").variants == tuple(SIZES)
    assert speech_aligner_config(None) == speech_aligner_config("default") == SpeechAlignerConfig()
    assert speech_aligner_config("reference-large", dropout=0.0, channels=[8, 8, 8, 16]).channels == (
        8,
        8,
        8,
        16,
    )
    with pytest.raises(
        ValueError, match="unknown speech-aligner variant 'huge'; choose one of: tiny, default"
    ):
        speech_aligner_config("huge")


def test_three_heads_at_the_frame_rate_over_the_phone_classes():
    model = SpeechAligner(speech_aligner_config("tiny")).eval()
    features, lengths = torch.randn(2, 37, 39), torch.tensor([37, 20])

    out = model.heads(features, lengths)

    assert out.hidden.shape == (2, 37, 32)
    assert out.phone_logits.shape == out.ctc_log_probs.shape == (2, 37, NUM_CLASSES)
    assert out.boundary.shape == (2, 37) and bool(((out.boundary > 0) & (out.boundary < 1)).all())
    torch.testing.assert_close(out.ctc_log_probs.exp().sum(-1), torch.ones(2, 37))
    log_probs, out_lengths = model(features, lengths)
    torch.testing.assert_close(log_probs, out.ctc_log_probs)
    assert out_lengths.tolist() == [37, 20]


def test_an_utterance_scores_the_same_alone_and_padded_in_a_batch():
    torch.manual_seed(0)
    model = SpeechAligner(speech_aligner_config("tiny", input_dim=80)).eval()
    short, long = torch.randn(1, 23, 80), torch.randn(1, 41, 80)
    batch = torch.zeros(2, 41, 80)
    batch[0, :23], batch[1] = short[0], long[0]

    alone = model.heads(short, torch.tensor([23]))
    batched = model.heads(batch, torch.tensor([23, 41]))

    torch.testing.assert_close(batched.ctc_log_probs[0, :23], alone.ctc_log_probs[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batched.phone_logits[0, :23], alone.phone_logits[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batched.boundary[0, :23], alone.boundary[0], rtol=1e-4, atol=1e-5)


def test_a_per_channel_offset_and_gain_on_the_input_do_not_change_the_outputs():
    # Utterance CMVN: log-mel-80's channels sit at +10..16 and a recording's gain moves them all; the aligner sees
    # the same normalized input whatever they are (padding excluded from the statistics).
    torch.manual_seed(0)
    model = SpeechAligner(speech_aligner_config("tiny", input_dim=80)).eval()
    features, lengths = torch.randn(2, 41, 80), torch.tensor([41, 23])
    offset, gain = 13.6 + 3 * torch.randn(1, 1, 80), 9.4 * torch.rand(1, 1, 80) + 0.5
    shifted = features * gain + offset
    shifted[1, 23:] = 1e3  # whatever sits in the padding

    plain, moved = model.heads(features, lengths), model.heads(shifted, lengths)

    torch.testing.assert_close(moved.ctc_log_probs[0], plain.ctc_log_probs[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(moved.ctc_log_probs[1, :23], plain.ctc_log_probs[1, :23], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(moved.boundary[1, :23], plain.boundary[1, :23], rtol=1e-4, atol=1e-4)
    raw = SpeechAligner(speech_aligner_config("tiny", input_dim=80, input_normalization=None)).eval()
    raw.load_state_dict(model.state_dict())  # CMVN has no parameters: the same weights load either way
    assert (raw.heads(shifted, lengths).ctc_log_probs[0] - plain.ctc_log_probs[0]).abs().max() > 1e-2
    with pytest.raises(ValueError, match="input_normalization"):
        speech_aligner_config("tiny", input_normalization="global")


def test_every_parameter_that_trains_gets_a_gradient_from_the_ctc_loss():
    # DDP fails a run whose trainable parameters take no part in the loss: the frame and boundary heads, which
    # CTC training does not reach, are frozen.
    model = SpeechAligner(speech_aligner_config("tiny"))
    log_probs, lengths = model(torch.randn(2, 30, 39), torch.tensor([30, 22]))
    torch.nn.functional.ctc_loss(
        log_probs.transpose(0, 1), torch.tensor([[3, 4], [5, 6]]), lengths, torch.tensor([2, 2])
    ).backward()

    assert [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None] == []
    assert {n for n, p in model.named_parameters() if not p.requires_grad} == {
        "phone_head.weight",
        "phone_head.bias",
        "boundary_head.weight",
        "boundary_head.bias",
    }


def test_the_ctc_head_learns_a_tiny_batch():
    torch.manual_seed(0)
    model = SpeechAligner(speech_aligner_config("tiny", dropout=0.0))
    features, lengths = torch.randn(2, 40, 39), torch.tensor([40, 30])
    targets, target_lengths = torch.tensor([[5, 9, 12, 5], [7, 3, 0, 0]]), torch.tensor([4, 2])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(250):
        log_probs, out_lengths = model(features, lengths)
        loss = torch.nn.functional.ctc_loss(log_probs.transpose(0, 1), targets, out_lengths, target_lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    model.eval()
    best = model(features, lengths)[0].argmax(-1)
    decoded = [torch.unique_consecutive(best[b, : lengths[b]]).tolist() for b in range(2)]
    assert [[i for i in d if i != 0] for d in decoded] == [[5, 9, 12, 5], [7, 3]]
    assert losses[-1] < losses[0] / 10
