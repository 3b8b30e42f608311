from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from asr_pipeline.data.batching import TimeBuckets
from asr_pipeline.data.collate import check_frame_labels, collate_batch


def item(utterance: str, frames: int, tokens: list[int], num_bins: int = 3) -> dict:
    return {
        "id": utterance,
        "features": torch.full((frames, num_bins), 1.0 + frames),
        "tokens": torch.tensor(tokens, dtype=torch.int64),
        "text": f"text of {utterance}",
        "duration_ms": 10 * frames,
    }


def test_collate_pads_to_the_longest_utterance_and_target():
    batch = collate_batch([item("a", 4, [1, 2]), item("b", 7, [3]), item("c", 2, [4, 5, 6])])

    # B = 3 utterances, T = 7 (longest), F = 3 bins, U = 3 (longest target)
    assert batch.features.shape == (3, 7, 3)
    assert batch.features.dtype == torch.float32
    assert batch.feature_lengths.tolist() == [4, 7, 2]
    assert batch.targets.shape == (3, 3)
    assert batch.targets.tolist() == [[1, 2, 0], [3, 0, 0], [4, 5, 6]]
    assert batch.target_lengths.tolist() == [2, 1, 3]
    assert batch.ids == ["a", "b", "c"]
    assert batch.texts == ["text of a", "text of b", "text of c"]
    assert batch.duration_ms.tolist() == [40, 70, 20]
    assert len(batch) == 3


def test_frames_past_an_utterance_are_zero_and_frames_within_it_are_its_features():
    batch = collate_batch([item("a", 4, [1]), item("b", 7, [1])])

    assert torch.all(batch.features[0, :4] == 5.0)
    assert torch.all(batch.features[0, 4:] == 0.0)
    assert torch.all(batch.features[1] == 8.0)


def test_pad_to_pads_every_row_to_the_bucket_with_zeros_and_keeps_the_lengths():
    items = [item("a", 40, [1]), item("b", 70, [1])]
    plain = collate_batch(items)  # (2, 70, 3)

    padded = collate_batch(items, pad_to=TimeBuckets((64, 96)).padded_length)

    assert padded.features.shape == (2, 96, 3)
    assert torch.equal(padded.features[:, :70], plain.features)
    assert padded.features[:, 70:].abs().sum() == 0
    assert padded.feature_lengths.tolist() == [40, 70]


def test_a_batch_at_its_bucket_length_is_not_padded_and_fewer_frames_than_the_longest_are_refused():
    assert collate_batch([item("a", 64, [1])], pad_to=TimeBuckets((64, 96)).padded_length).features.shape == (
        1,
        64,
        3,
    )
    with pytest.raises(ValueError, match=r"pad_to\(7\) = 5: a batch cannot be padded to fewer frames"):
        collate_batch([item("a", 7, [1])], pad_to=lambda frames: frames - 2)


def test_padding_is_written_as_zeros_whatever_memory_the_batch_is_given(monkeypatch):
    # The batch tensor is allocated uninitialised: here it is given NaN memory, which every padding cell
    # must be overwritten from.
    full = torch.full
    monkeypatch.setattr(torch, "empty", lambda size, dtype: full(size, float("nan"), dtype=dtype))

    batch = collate_batch([item("a", 5, [1]), item("b", 9, [1])], pad_to=lambda frames: 16)

    assert torch.all(batch.features[0, :5] == 6.0) and torch.all(batch.features[1, :9] == 10.0)
    assert torch.all(batch.features[0, 5:] == 0.0) and torch.all(batch.features[1, 9:] == 0.0)


def test_an_empty_target_is_allowed_and_has_length_zero():
    batch = collate_batch([item("a", 4, []), item("b", 5, [7, 7])])

    assert batch.target_lengths.tolist() == [0, 2]
    assert batch.targets.shape == (2, 2)


def test_utterances_of_different_feature_dimensions_are_refused_with_their_ids():
    with pytest.raises(ValueError, match=r"\['a', 'b'\].*\[3, 5\]"):
        collate_batch([item("a", 4, [1], num_bins=3), item("b", 4, [1], num_bins=5)])


def test_to_moves_tensors_and_keeps_the_strings():
    batch = collate_batch([item("a", 4, [1])]).to("cpu")

    assert batch.ids == ["a"]
    assert batch.features.device.type == "cpu"


def test_frame_labels_must_match_the_models_output_frames_utterance_by_utterance():
    items = [{**item("a", 8, [1]), "frame_labels": torch.tensor([1, 0, 0, 2])},
             {**item("b", 6, [2]), "frame_labels": torch.tensor([2, 0, 0])}]  # fmt: skip
    batch = collate_batch(items)
    check_frame_labels(batch, torch.tensor([4, 3]))  # padding (FRAME_LABEL_PAD) is not a label

    with pytest.raises(ValueError, match=r"^utterance b: the alignment has 3 frame labels but the model outputs 2 "
                       r"frames for its 6 \(1 of 2 in the batch differ\); align with a model of the same frame rate"):  # fmt: skip
        check_frame_labels(batch, torch.tensor([4, 2]), batch.feature_lengths)


def test_in_a_loader_worker_the_batch_is_made_in_shared_memory_and_in_process_it_is_not():
    items = [item("a", 4, [1]), item("b", 7, [2]), item("c", 5, [3]), item("d", 2, [4])]

    def made_shared(batch_items: list[dict]) -> bool:
        return collate_batch(batch_items).features.is_shared()

    in_workers = list(DataLoader(items, batch_size=2, collate_fn=made_shared, num_workers=1))

    assert in_workers == [True, True]
    assert not made_shared(items)
