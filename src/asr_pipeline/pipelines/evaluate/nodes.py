"""Nodes of the `evaluate` stage."""

from __future__ import annotations

from pathlib import Path

from asr_pipeline.decoding.decoders import DecodingResources
from asr_pipeline.decoding.evaluation import (
    EvaluationParams,
    beam_decoders_skipped,
    decode_and_score,
    greedy_decoder,
    run_log_probs,
)
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.text.tokenizer import CTCTokenizer


def evaluate_split(
    run_dir: Path,
    feature_shards: list[str],
    tokenizer_model: bytes,
    lexicon: Path,
    word_lm: Path,
    token_lm: Path,
    tuned: dict,
    params: dict,
) -> tuple[str, dict]:
    """Decode one split greedily and with every decoder of ``decoding.decoders``, each with the options
    `tune_decoding` chose on dev (``tuned``); score them all.

    ``run_dir`` is the trained run (its checkpoint exists: ``trained_model`` in the catalog). Returns the
    hypotheses (JSONL: id, reference, greedy, then one field per decoder) and metrics in percent:
    ``{"utterances": N, "greedy": {"wer", "cer"}, "lexicon": {...}, ...}``. A Paraformer run is scored
    greedily only (its one parallel pass); the beam decoders it cannot use are listed under ``skipped``.
    """
    settings = EvaluationParams.from_dict(params)
    run = settings.load_run(run_dir)
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=run.blank_id)
    resources = DecodingResources(word_lm=word_lm, token_lm=token_lm, lexicon=lexicon)
    decoders = {"greedy": greedy_decoder(run, tokenizer)}
    skipped = beam_decoders_skipped(run, settings.decoders)
    for name in settings.decoders:
        if name in skipped:
            continue
        if name not in tuned:
            raise ValueError(f"decoding.decoders lists {name}, which tune_decoding did not tune: rerun it")
        decoders[name] = resources.build(DecodingOptions.from_dict(tuned[name], f"tuned {name}"), tokenizer)
    hypotheses, metrics = decode_and_score(run_log_probs(run, feature_shards, settings.batch_size), decoders)
    if skipped:
        metrics["skipped"] = skipped
    return hypotheses, metrics
