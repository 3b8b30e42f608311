"""The scoring head (pron.scoring): the linear-scaled warmup + cosine rate, a head that learns scores its
inputs carry, the best validation epoch kept, and the aligner left alone unless the CTC weight is set."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from asr_pipeline.models.speech_aligner import SpeechAligner, speech_aligner_config
from asr_pipeline.pron.scoring import Example, ScoringOptions, learning_rate, train_scoring_head


def test_the_rate_warms_up_to_the_batch_scaled_peak_and_decays_to_zero_by_cosine():
    options = ScoringOptions(learning_rate=1e-3, batch_size=16, reference_batch_size=8, warmup_steps=10)
    assert options.peak_learning_rate == pytest.approx(2e-3)
    rates = [learning_rate(step, 110, options) for step in range(110)]
    assert rates[0] == pytest.approx(2e-4) and rates[9] == pytest.approx(2e-3)
    assert rates[10] == pytest.approx(2e-3) and rates[60] == pytest.approx(1e-3)
    assert all(a >= b for a, b in itertools.pairwise(rates[10:])) and rates[-1] < 1e-5


def synthetic_examples(count: int, seed: int) -> list[Example]:
    """Utterances whose features show each phone for 6 frames (feature index = phone id - 2); a third of them
    were 'said wrong' throughout (every phone labelled 0, word and utterance 0) and carry a marker (+2 on every
    frame's last feature), the others were said right (2, 10, 10): what the aligner's hidden states see."""
    rng = random.Random(seed)
    examples = []
    for number in range(count):
        words = [[rng.randrange(2, 40) for _ in range(rng.randint(2, 4))] for _ in range(rng.randint(1, 3))]
        phones = [p for word in words for p in word]
        frames = torch.randn(6 * len(phones) + 4, 39) * 0.1
        for index, phone in enumerate(phones):
            frames[2 + 6 * index : 8 + 6 * index, phone - 2] += 3.0
        wrong = rng.random() < 1 / 3
        if wrong:
            frames[:, -1] += 2.0
        phone_label, word_label = (0.0, 0.0) if wrong else (2.0, 10.0)
        examples.append(
            Example(
                f"u{seed}-{number}",
                frames,
                phones,
                [len(w) for w in words],
                [phone_label] * len(phones),
                [word_label] * len(words),
                word_label,
            )
        )
    return examples


@pytest.fixture(scope="module")
def aligner():
    torch.manual_seed(0)
    # Without utterance CMVN: the 'said wrong' marker is a constant offset over the utterance, which CMVN removes.
    return SpeechAligner(speech_aligner_config("tiny", dropout=0.0, input_normalization=None)).eval()


def test_the_head_learns_scores_its_inputs_carry_and_keeps_the_best_epoch(aligner):
    options = ScoringOptions(
        epochs=8, batch_size=4, reference_batch_size=4, learning_rate=3e-3, warmup_steps=4
    )
    before = {k: v.clone() for k, v in aligner.state_dict().items()}

    result = train_scoring_head(
        aligner, synthetic_examples(60, seed=1), synthetic_examples(30, seed=2), options
    )

    assert result["test"]["phone"]["spearman"] > 0.7
    assert result["test"]["phone"]["spearman_ci"][0] > 0.5
    rhos = [epoch["val_phone_spearman"] for epoch in result["epochs"]]
    assert result["best_epoch"] == rhos.index(max(rhos)), "the best validation epoch, not the last"
    assert all(torch.equal(before[k], v) for k, v in aligner.state_dict().items()), (
        "CTC weight 0: aligner untouched"
    )


def test_a_ctc_weight_trains_the_aligner_too_and_too_few_utterances_are_refused(aligner):
    options = ScoringOptions(epochs=1, batch_size=4, ctc_weight=0.5)
    result = train_scoring_head(
        aligner, synthetic_examples(20, seed=3), synthetic_examples(6, seed=4), options
    )
    assert len(result["epochs"]) == 1 and result["test"]["phone"]["items"] > 0

    with pytest.raises(ValueError, match="the scoring head needs more"):
        train_scoring_head(aligner, synthetic_examples(2, seed=5), synthetic_examples(3, seed=6), options)


def test_another_models_representations_at_another_frame_rate_can_feed_the_head(aligner):
    # A stand-in encoder at half the frame rate and 24 wide: a fixed projection of every other frame.
    projection = torch.randn(39, 24, generator=torch.Generator().manual_seed(7))

    def encoder(example: Example) -> torch.Tensor:
        return example.features[::2] @ projection  # (T / 2, 24)

    options = ScoringOptions(
        epochs=12, batch_size=4, reference_batch_size=4, learning_rate=3e-3, warmup_steps=4
    )
    result = train_scoring_head(
        aligner, synthetic_examples(50, seed=1), synthetic_examples(25, seed=2), options, encoder=encoder
    )

    assert result["test"]["phone"]["spearman"] > 0.8
    with pytest.raises(
        ValueError, match="ctc_weight trains the aligner, whose representations an encoder replaces"
    ):
        train_scoring_head(
            aligner, synthetic_examples(20, seed=3), [], ScoringOptions(ctc_weight=0.5), encoder=encoder
        )
