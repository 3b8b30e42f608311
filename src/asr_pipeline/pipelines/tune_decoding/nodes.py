"""Nodes of the `tune_decoding` stage."""

from __future__ import annotations

from pathlib import Path

from asr_pipeline.decoding.decoders import DecodingResources
from asr_pipeline.decoding.evaluation import EvaluationParams, beam_decoders_skipped, run_log_probs
from asr_pipeline.decoding.tuning import tune_decoders
from asr_pipeline.text.tokenizer import CTCTokenizer


def tune_decoding(
    run_dir: Path,
    dev_shards: list[str],
    tokenizer_model: bytes,
    lexicon: Path,
    word_lm: Path,
    token_lm: Path,
    params: dict,
) -> tuple[dict, dict]:
    """Search ``decoding.tune``'s grid of each decoder on dev; return the chosen options per decoder (what
    `evaluate` decodes with) and a report: each decoder's chosen values, dev WER/CER and the whole grid.

    A decoder without a grid keeps its base options (scored on dev all the same)."""
    settings = EvaluationParams.from_dict(params)
    resources = DecodingResources(word_lm=word_lm, token_lm=token_lm, lexicon=lexicon)
    run = settings.load_run(run_dir)
    skipped = beam_decoders_skipped(run, settings.decoders)
    if skipped:  # a Paraformer run: no beam search, nothing to tune
        return {}, {name: {"skipped": reason} for name, reason in skipped.items()}
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=run.blank_id)
    batches = list(run_log_probs(run, dev_shards, settings.batch_size))
    return tune_decoders(
        {name: settings.base_options(name) for name in settings.decoders},
        settings.tune,
        lambda options: resources.build(options, tokenizer),
        batches,
    )
