"""The aligner's frame and boundary heads (pron.aligner_heads): targets from a forced CTC path, peak picking and
tolerant boundary matching, and heads that learn on a CTC-trained aligner while its trunk stays as it was."""

from __future__ import annotations

import random

import pytest
import torch

from asr_pipeline.models.speech_aligner import SpeechAligner, speech_aligner_config
from asr_pipeline.pron.aligner_heads import (
    HeadExample,
    HeadOptions,
    boundary_hits,
    frame_labels,
    load_aligner,
    matched_boundaries,
    peaks,
    save_aligner,
    score_word_starts,
    train_heads,
)
from asr_pipeline.text.phones import SILENCE_ID


def test_frame_targets_give_each_phone_its_frames_up_to_the_next_spike_and_mark_word_starts():
    #       0  1  2  3  4  5  6  7  8  9 10 11 12 13
    path = [0, 0, 5, 5, 0, 7, 0, 0, 9, 0, 0, 0, 0, 0]

    targets = frame_labels(path, phones_per_word=[2, 1])

    S = SILENCE_ID
    # phone 5 from its spike to 7's, 7 to 9's; the last phone lasts the median phone (3 frames), SIL after
    assert targets.labels.tolist() == [S, S, 5, 5, 5, 7, 7, 7, 9, 9, 9, S, S, S]
    assert torch.nonzero(targets.boundaries).flatten().tolist() == [2, 8]  # words start at phones 0 and 2


def test_a_last_phone_longer_than_the_median_keeps_its_whole_spike_and_a_lone_phone_its_own():
    assert frame_labels([0, 4, 0, 6, 6, 6, 6, 0], [1, 1]).labels.tolist() == [1, 4, 4, 6, 6, 6, 6, 1]
    assert frame_labels([0, 0, 8, 8, 0], [1]).labels.tolist() == [1, 1, 8, 8, 1]


def test_frame_targets_refuse_words_that_do_not_hold_the_paths_phones():
    with pytest.raises(ValueError, match="3 phones in the words but 2 in the path"):
        frame_labels([0, 5, 0, 7], [2, 1])


def test_peaks_are_local_maxima_above_the_threshold_and_hits_match_each_true_boundary_once():
    probabilities = torch.tensor([0.1, 0.7, 0.9, 0.9, 0.2, 0.4, 0.8, 0.3, 0.6])
    assert peaks(probabilities, radius=1) == [
        2,
        6,
        8,
    ]  # the plateau's first frame; 0.4 is below the threshold
    assert peaks(probabilities, radius=2) == [2, 6]  # 0.6 is beside 0.8
    assert peaks(probabilities, radius=4) == [2]
    assert boundary_hits([2, 6, 8], [3, 9], tolerance=1) == 2
    assert boundary_hits([2, 3], [3], tolerance=2) == 1  # one true boundary, one hit
    assert boundary_hits([0, 10], [5], tolerance=2) == 0
    assert matched_boundaries([4, 5], [5, 9], tolerance=4) == [(4, 5), (5, 9)]  # the nearest free one


def synthetic_examples(count: int, seed: int) -> list[HeadExample]:
    """Utterances of 1-3 words of 2-3 phones, each phone shown for 6 frames (feature index = phone id - 2), the
    first phone of each word marked on the last feature, with 4 pause frames at either end."""
    rng = random.Random(seed)
    examples = []
    for number in range(count):
        words = [[rng.randrange(2, 20) for _ in range(rng.randint(2, 3))] for _ in range(rng.randint(1, 3))]
        phones = [p for word in words for p in word]
        frames = torch.randn(6 * len(phones) + 8, 39) * 0.1
        index = 0
        for word in words:
            for position, phone in enumerate(word):
                rows = slice(4 + 6 * index, 10 + 6 * index)
                frames[rows, phone - 2] += 3.0
                if position == 0:
                    frames[rows, -1] += 3.0
                index += 1
        examples.append(HeadExample(f"u{seed}-{number}", frames, phones, [len(w) for w in words]))
    return examples


@pytest.fixture(scope="module")
def ctc_trained_aligner() -> SpeechAligner:
    """A tiny aligner taught the synthetic phones with CTC, as the pron_aligner stage's run is."""
    torch.manual_seed(0)
    # The synthetic features are zero-mean already; utterance CMVN would scale the channels of the phones an
    # utterance lacks (noise of 0.1) up to the size of the signal.
    model = SpeechAligner(speech_aligner_config("tiny", dropout=0.0, input_normalization=None))
    examples = synthetic_examples(48, seed=0)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(25):
        for start in range(0, len(examples), 8):
            batch = examples[start : start + 8]
            lengths = torch.tensor([e.features.shape[0] for e in batch])
            features = torch.nn.utils.rnn.pad_sequence([e.features for e in batch], batch_first=True)
            targets = torch.nn.utils.rnn.pad_sequence(
                [torch.tensor(e.phones) for e in batch], batch_first=True
            )
            log_probs, out_lengths = model(features, lengths)
            loss = torch.nn.functional.ctc_loss(
                log_probs.transpose(0, 1), targets, out_lengths, torch.tensor([len(e.phones) for e in batch])
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def test_the_heads_learn_the_alignment_and_the_trunk_and_ctc_head_stay_as_they_were(ctc_trained_aligner):
    before = {k: v.clone() for k, v in ctc_trained_aligner.state_dict().items()}
    options = HeadOptions(epochs=8, batch_size=8, learning_rate=1e-2, tolerance_frames=2)

    trained, report = train_heads(
        ctc_trained_aligner, synthetic_examples(48, seed=1), synthetic_examples(24, seed=2), options
    )

    assert report["unaligned"] == {"train": 0, "test": 0}
    assert report["test"]["frame_accuracy"] > 0.8 > report["test_untrained"]["frame_accuracy"]
    # the tiny trunk (32 wide) localizes word starts only roughly: F1 about 0.58 here, from about 0.3 untrained
    assert report["test"]["boundary"]["f1"] > max(0.5, report["test_untrained"]["boundary"]["f1"] + 0.2)
    assert report["epochs"][-1]["loss"] < report["epochs"][0]["loss"]
    changed = {k for k, v in trained.state_dict().items() if not torch.equal(before[k], v)}
    assert changed == {"phone_head.weight", "phone_head.bias", "boundary_head.weight", "boundary_head.bias"}
    assert all(torch.equal(before[k], v) for k, v in ctc_trained_aligner.state_dict().items()), (
        "the caller's model is left alone"
    )
    assert not any(p.requires_grad for p in trained.parameters())

    # Against the true word starts (frame 4 + 6 per phone before the word): the forced alignment's spikes sit at
    # the phones' onsets here, and the head learnt them from it
    test = synthetic_examples(24, seed=2)
    truth = {e.id: [4 + 6 * sum(e.phones_per_word[:w]) for w in range(len(e.phones_per_word))] for e in test}
    scored = score_word_starts(trained, test, truth, options)
    assert scored["utterances"] == 24 and scored["true"] == sum(len(t) for t in truth.values())
    assert (
        scored["forced_alignment"]["f1"] > 0.9
        and abs(scored["forced_alignment"]["median_offset_frames"]) <= 1
    )
    assert scored["head"]["f1"] > 0.5
    late = score_word_starts(trained, test, {k: [f + 6 for f in v] for k, v in truth.items()}, options)
    assert late["forced_alignment"]["f1"] < 0.2 and late["forced_alignment"]["median_offset_frames"] <= -4


def test_training_needs_an_utterance_the_aligner_can_align(ctc_trained_aligner):
    too_short = HeadExample("short", torch.zeros(2, 39), [3, 4, 5], [3])
    with pytest.raises(ValueError, match="none of the 1 training utterances could be force-aligned"):
        train_heads(ctc_trained_aligner, [too_short], [too_short], HeadOptions(epochs=1))


def test_a_saved_aligner_loads_with_its_heads_and_config(tmp_path):
    torch.manual_seed(1)
    model = SpeechAligner(speech_aligner_config("tiny", input_dim=80)).eval()
    features, lengths = torch.randn(1, 30, 80), torch.tensor([30])

    save_aligner(model, tmp_path / "aligner.safetensors")
    loaded = load_aligner(tmp_path / "aligner.safetensors")

    assert loaded.config == model.config
    expected, got = model.heads(features, lengths), loaded.heads(features, lengths)
    torch.testing.assert_close(got.phone_logits, expected.phone_logits)
    torch.testing.assert_close(got.boundary, expected.boundary)
    assert [p.name for p in tmp_path.iterdir()] == ["aligner.safetensors"]
