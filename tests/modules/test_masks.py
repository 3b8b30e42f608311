import pytest
import torch

from asr_pipeline.modules.masks import mask_padded_frames, padding_mask, span_mask
from tests.host_reads import HostReads


def test_padding_mask_is_true_exactly_past_each_length():
    mask = padding_mask(torch.tensor([3, 1, 0]), max_length=4)

    assert mask.tolist() == [
        [False, False, False, True],
        [False, True, True, True],
        [True, True, True, True],
    ]


def test_padding_mask_defaults_to_the_longest_length():
    assert padding_mask(torch.tensor([2, 5])).shape == (2, 5)


def test_mask_padded_frames_zeroes_padding_and_keeps_real_frames():
    x = torch.randn(2, 4, 3, 5)  # (B, T, C, F): the mask broadcasts over trailing dims
    masked = mask_padded_frames(x, padding_mask(torch.tensor([4, 2]), 4))

    assert torch.equal(masked[0], x[0])
    assert torch.equal(masked[1, :2], x[1, :2])
    assert masked[1, 2:].abs().sum() == 0


def test_utterance_normalize_uses_only_real_frames_and_zeroes_padding():
    from asr_pipeline.modules.masks import utterance_normalize

    torch.manual_seed(0)
    alone = torch.randn(1, 5, 3) * 4 + 10
    padded = torch.cat([alone, torch.full((1, 4, 3), 1e4)], dim=1)  # junk in the padding
    out = utterance_normalize(padded, torch.tensor([5]))
    torch.testing.assert_close(out[:, :5], utterance_normalize(alone, torch.tensor([5])))
    assert torch.all(out[:, 5:] == 0)
    torch.testing.assert_close(out[0, :5].mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(out[0, :5].std(0, unbiased=False), torch.ones(3), atol=1e-4, rtol=0)


def test_a_models_input_normalization_is_utterance_cmvn_or_nothing():
    from asr_pipeline.modules.masks import normalize_input, utterance_normalize

    features, lengths = torch.randn(2, 6, 3) * 5 + 7, torch.tensor([6, 4])
    assert torch.equal(
        normalize_input(features, lengths, "utterance"), utterance_normalize(features, lengths)
    )
    assert normalize_input(features, lengths, None) is features


def test_fairseq_span_masks_cover_the_recipe_share_within_each_length():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([500] * 20 + [30, 5, 0])
    mask = span_mask(lengths, 500, 0.8, 10, 2, rule="fairseq", generator=generator)
    share = mask[:20].float().mean().item()
    assert 0.50 < share < 0.60  # 1 - exp(-0.8) = 0.55 for overlapping spans
    assert not mask[20, 30:].any() and not mask[21, 5:].any()  # never past a length
    assert mask[21].sum() == 5  # a row shorter than a span is masked whole (min_masks 2)
    assert not mask[22].any()


@pytest.mark.parametrize("rule", ["fairseq", "hf"])
def test_each_row_gets_its_rules_count_of_distinct_starts(rule):
    # Spans of 1 frame: each masked frame is one start, so the count is exact. fairseq: max(2, int(0.3 * L + u))
    # with u per row, starts in [0, max(L - 1, 1)); hf: min(max(int(0.3 * L + u), 2), total, L) with u once a
    # batch. 0.3 * 45 = 13.5: 14 spans when u >= 0.5; 0.3 * 17 = 5.1: 6 when u >= 0.9.
    lengths = torch.tensor([45, 45, 17, 3, 1])
    counts = set()
    for seed in range(30):
        mask = span_mask(lengths, 45, 0.3, 1, 2, rule=rule, generator=torch.Generator().manual_seed(seed))
        masked = mask.sum(1).tolist()
        assert masked[0] in (13, 14) and masked[1] in (13, 14) and masked[2] in (5, 6)
        assert masked[3] == 2 and masked[4] == 1  # the one start a 1-frame row has room for
        assert not mask[2, 17:].any()
        if rule == "fairseq":
            assert not mask[:2, 44].any() and not mask[2, 16].any()  # starts before L - span
        else:
            assert masked[0] == masked[1], "one u for the batch"
            assert not (masked[2] == 6 and masked[0] == 13), "one u for the batch"
        counts.add(masked[0])
    assert counts == {13, 14}, "u moves the count"


def test_hf_span_masks_fall_inside_each_length():
    # int(prob * L / span + u) spans, at least min_spans: 100 frames -> int(2 + u) = 2, 37 -> max(int(0.74 + u),
    # 2) = 2; 5 frames cannot hold a 10-frame span -> none.
    mask = span_mask(torch.tensor([100, 37, 5]), 100, 0.2, 10, 2, rule="hf")

    assert 11 <= int(mask[0].sum()) <= 20 and 11 <= int(mask[1].sum()) <= 20  # 2 distinct starts
    assert not mask[1, 37:].any() and not mask[2].any()


@pytest.mark.parametrize("rule", ["fairseq", "hf"])
def test_spans_are_whole_and_starts_uniform_over_the_room(rule):
    # One span of 5 in a row of 12: fairseq starts in [0, 7), hf in [0, 8); the mask is that run of 5 frames
    # (fairseq: cut at the length). Over many draws every start shows up.
    starts = set()
    for seed in range(200):
        mask = span_mask(
            torch.tensor([12]), 12, 0.01, 5, 1, rule=rule, generator=torch.Generator().manual_seed(seed)
        )
        frames = mask[0].nonzero().flatten().tolist()
        assert frames == list(range(frames[0], frames[0] + 5))
        starts.add(frames[0])
    assert starts == set(range(7 if rule == "fairseq" else 8))


def test_span_masks_read_nothing_back():
    """Drawn where the lengths are: on a GPU a step waits for nothing here (the models drew on the host
    from lengths read back before session 29)."""
    with HostReads() as mode:
        span_mask(torch.tensor([50, 20]), 50, 0.5, 4, 2, rule="fairseq")
        span_mask(torch.tensor([50, 20]), 50, 0.5, 4, 2, rule="hf")
    assert mode.reads == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cpu_generator_gives_cuda_the_cpus_masks():
    """Validation's fixed masks (HuBERT's eval mode) are drawn by a CPU generator and copied over, so a run's
    validation scores do not depend on the device."""
    lengths = torch.tensor([50, 31, 12])
    for rule in ("fairseq", "hf"):
        here = span_mask(lengths, 50, 0.5, 4, 2, rule=rule, generator=torch.Generator().manual_seed(3))
        there = span_mask(
            lengths.cuda(), 50, 0.5, 4, 2, rule=rule, generator=torch.Generator().manual_seed(3)
        )
        assert torch.equal(there.cpu(), here), rule
