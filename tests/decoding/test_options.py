"""decoding.options: the one options dataclass of every decoder, each bad value refused naming the field and
the rule, and which LM a decoder fuses."""

from __future__ import annotations

import pytest

from asr_pipeline.decoding.options import DECODERS, DecodingOptions


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"decoder": "viterbi"}, "decoder must be one of greedy, lexicon"),
        ({"beam_width": 0}, "beam_width must be >= 1, got 0"),
        ({"beam_width": 4, "n_best": 5}, r"n_best must lie in \[1, beam_width=4\], got 5"),
        ({"n_best": 0}, r"n_best must lie in \[1, beam_width=16\], got 0"),
        ({"lm_weight": -0.1}, "lm_weight must be >= 0"),
        ({"beam_size_token": 0}, "beam_size_token must be >= 1 or null"),
        ({"beam_threshold": 0}, "beam_threshold must be > 0"),
        (
            {"decoder": "lexicon", "lm_no_bos": True},
            "lm_no_bos/lm_no_eos are options of the prefix_beam decoder",
        ),
        ({"blank_skip_threshold": 0.0}, r"blank_skip_threshold must lie in \(0, 1\]"),
        ({"blank_skip_threshold": 1.5}, r"blank_skip_threshold must lie in \(0, 1\]"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field(values, message):
    with pytest.raises(ValueError, match=message):
        DecodingOptions(**values)


def test_the_edges_of_each_rule_are_accepted():
    DecodingOptions(
        decoder="prefix_beam", beam_width=1, n_best=1, lm_weight=0.0, lm_no_bos=True, lm_no_eos=True
    )
    DecodingOptions(beam_width=4, n_best=4, beam_size_token=1, blank_skip_threshold=1.0)


@pytest.mark.parametrize(
    ("decoder", "lm"),
    [
        ("greedy", None),
        ("lexicon", "word"),
        ("prefix_beam", "word"),
        ("lexicon_free", "token"),
        ("cuda", None),
    ],
)
def test_each_decoder_fuses_its_kind_of_lm(decoder, lm):
    assert DecodingOptions(decoder=decoder).lm_kind == lm


def test_every_decoder_is_covered_and_options_read_from_a_dict():
    assert set(DECODERS) == {"greedy", "lexicon", "lexicon_free", "prefix_beam", "cuda"}
    assert DecodingOptions.from_dict({"decoder": "lexicon", "beam_width": 8}) == DecodingOptions("lexicon", 8)
