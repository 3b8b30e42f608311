"""decoding.evaluation: every decoder reads the same batches and is scored against the references; what a run's
output kind allows (collapse, beam decoders); params.yaml ``decoding`` checked naming the key."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from asr_pipeline.decoding.evaluation import (
    EvaluationParams,
    beam_decoders_skipped,
    decode_and_score,
    greedy_decoder,
)
from asr_pipeline.decoding.inference import BatchOutput
from asr_pipeline.models.loading import RunModel

from .factories import log_probs_from_rows, spelled_rows


def run_of(output: str) -> RunModel:
    return RunModel(nn.Identity(), "tiny-arch", 0, output, {}, {})  # type: ignore[arg-type]


def spelled(tokenizer, texts: list[str]) -> BatchOutput:
    """One batch whose frames spell each text cleanly (a token frame, then a blank frame), padded with blank."""
    rows = [spelled_rows(tokenizer.encode(text), tokenizer.blank_id) for text in texts]
    frames = max(len(r) for r in rows)
    padded = [r + [{tokenizer.blank_id: 0.9}] * (frames - len(r)) for r in rows]
    log_probs = torch.stack([log_probs_from_rows(r, tokenizer.vocab_size) for r in padded]).float()
    return BatchOutput(
        [f"u{i}" for i in range(len(texts))], texts, log_probs, torch.tensor([len(r) for r in rows])
    )


def test_every_decoder_is_scored_per_utterance_and_over_the_set(char_tokenizer):
    batches = [spelled(char_tokenizer, ["the cat", "a dog"]), spelled(char_tokenizer, ["the mat"])]
    batches[1].texts[0] = "the bat"  # the audio says "the mat": one word and one character wrong

    hypotheses, metrics = decode_and_score(batches, {"greedy": greedy_decoder(run_of("ctc"), char_tokenizer)})

    rows = [json.loads(line) for line in hypotheses.splitlines()]
    assert [(r["id"], r["reference"], r["greedy"]) for r in rows] == [
        ("u0", "the cat", "the cat"),
        ("u1", "a dog", "a dog"),
        ("u0", "the bat", "the mat"),
    ]
    # 1 word of 6, 1 character of 19 (spaces count: "the cat" 7 + "a dog" 5 + "the bat" 7)
    assert metrics == {"utterances": 3, "greedy": {"wer": round(100 / 6, 3), "cer": round(100 / 19, 3)}}


def test_a_ctc_run_collapses_repeats_and_a_paraformer_run_reads_one_token_per_position(char_tokenizer):
    ids = char_tokenizer.encode("aa")  # "▁", "a", "a"
    log_probs = log_probs_from_rows([{i: 0.9} for i in ids], char_tokenizer.vocab_size).float()[None]
    lengths = torch.tensor([len(ids)])

    ctc = greedy_decoder(run_of("ctc"), char_tokenizer).decode_batch(log_probs, lengths)
    per_token = greedy_decoder(run_of("paraformer"), char_tokenizer).decode_batch(log_probs, lengths)

    assert ctc[0][0].text == "a" and per_token[0][0].text == "aa"


def test_beam_decoders_are_skipped_with_the_reason_only_without_frame_posteriors():
    assert beam_decoders_skipped(run_of("ctc"), ["lexicon"]) == {}
    skipped = beam_decoders_skipped(run_of("paraformer"), ["lexicon", "prefix_beam"])
    assert list(skipped) == ["lexicon", "prefix_beam"]
    assert "a tiny-arch run decodes in one parallel pass" in skipped["lexicon"]


def test_params_accept_beam_decoders_and_a_grid_over_them():
    params = EvaluationParams.from_dict(
        {"decoders": ["prefix_beam"], "tune": {"prefix_beam": {"lm_weight": [0.5]}}}
    )

    assert params.decoders == ("prefix_beam",)
    assert params.base_options("prefix_beam").beam_width == 16


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"decoders": ["greedy"]}, r"decoding.decoders: \['greedy'\] are not beam decoders"),
        ({"decoders": ["viterbi"]}, r"decoding.decoders: \['viterbi'\] are not beam decoders"),
        ({"decoders": ["lexicon"], "tune": {"cuda": {}}}, r"decoding.tune names \['cuda'\], which decoding"),
        (
            {"weights": "swa"},
            r"^params.yaml decoding.weights: unknown weights 'swa'; choose one of raw, averaged, ema or averaged:STEP$",
        ),
    ],
)
def test_bad_params_are_refused_naming_the_key(raw, message):
    with pytest.raises(ValueError, match=message):
        EvaluationParams.from_dict(raw)
