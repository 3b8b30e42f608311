"""The dev grid search: every combination decoded over the same log-probs, the lowest WER chosen."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.decoding.decoders import build_decoder
from asr_pipeline.decoding.inference import BatchOutput
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.decoding.tuning import grid_points, tune_decoder, tune_decoders

from .factories import ambiguous_cat_or_cot


def test_grid_points_are_every_combination_in_row_major_order():
    points = grid_points({"lm_weight": [0.0, 1.0], "word_score": [-1.0, 0.0, 2.0]})
    assert len(points) == 6
    assert points[:3] == [{"lm_weight": 0.0, "word_score": w} for w in (-1.0, 0.0, 2.0)]


@pytest.mark.parametrize(
    ("grid", "message"), [({"beam_threshold": [1.0]}, "cannot tune"), ({"lm_weight": []}, "no values")]
)
def test_a_bad_grid_is_refused(grid, message):
    with pytest.raises(ValueError, match=message):
        grid_points(grid)


def test_the_lm_weight_that_fixes_the_ambiguous_word_is_chosen(char_tokenizer, tiny_lm_path):
    log_probs = ambiguous_cat_or_cot(char_tokenizer).float()[None]  # (1, T, V): acoustics say "cot"
    batch = BatchOutput(["u1"], ["the cat sat"], log_probs, torch.tensor([log_probs.shape[1]]))
    seen = []
    result = tune_decoder(
        DecodingOptions(decoder="prefix_beam", beam_width=8),
        {"lm_weight": [0.0, 0.45]},
        lambda options: build_decoder(options, char_tokenizer, tiny_lm_path),
        [batch],
        progress=seen.append,
    )
    table, best = result.table, result.options
    assert [point.values["lm_weight"] for point in table] == [0.0, 0.45] and seen == table
    assert table[0].wer > 0 and table[1].wer == 0  # without the LM "cot" stays; with it "cat" wins
    assert best.lm_weight == 0.45 and best.decoder == "prefix_beam" and best.beam_width == 8
    assert result.best is table[1]
    assert result.report() == {
        "chosen": {"lm_weight": 0.45},
        "dev": {"wer": 0.0, "cer": 0.0},
        "grid": [{"lm_weight": 0.0, "wer": round(table[0].wer, 3), "cer": round(table[0].cer, 3)},
                 {"lm_weight": 0.45, "wer": 0.0, "cer": 0.0}],
    }  # fmt: skip


def test_ties_go_to_the_earlier_grid_point(char_tokenizer):
    log_probs = ambiguous_cat_or_cot(char_tokenizer).float()[None]
    batch = BatchOutput(["u1"], ["the cot sat"], log_probs, torch.tensor([log_probs.shape[1]]))
    result = tune_decoder(
        DecodingOptions(decoder="lexicon_free"),
        {"beam_width": [4, 8]},
        lambda options: build_decoder(options, char_tokenizer),
        [batch],
    )
    assert result.table[0].wer == result.table[1].wer == 0
    assert result.options.beam_width == 4 and result.best is result.table[0]


def test_each_decoder_is_tuned_over_its_own_grid_and_one_without_a_grid_keeps_its_base(char_tokenizer):
    log_probs = ambiguous_cat_or_cot(char_tokenizer).float()[None]
    batch = BatchOutput(["u1"], ["the cot sat"], log_probs, torch.tensor([log_probs.shape[1]]))
    bases = {
        "wide": DecodingOptions(decoder="lexicon_free", beam_width=16),
        "tuned": DecodingOptions(decoder="lexicon_free"),
    }
    tuned, reports = tune_decoders(
        bases,
        {"tuned": {"beam_width": [2, 4]}},
        lambda options: build_decoder(options, char_tokenizer),
        [batch],
    )
    assert tuned["wide"]["beam_width"] == 16 and tuned["tuned"]["beam_width"] == 2
    assert [len(reports[name]["grid"]) for name in ("wide", "tuned")] == [1, 2]
    assert reports["wide"]["chosen"] == {} and reports["tuned"]["chosen"] == {"beam_width": 2}
