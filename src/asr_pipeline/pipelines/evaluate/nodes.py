"""Nodes of the `evaluate` stage."""

from __future__ import annotations

import tempfile
from pathlib import Path

from asr_pipeline.decoding.beam_search import BeamSearchOptions, load_lm
from asr_pipeline.decoding.evaluation import decode_and_score


def evaluate_split(
    run_dir: Path,
    feature_shards: list[str],
    tokenizer_model: bytes,
    lm_binary: bytes,
    params: dict,
) -> tuple[str, dict]:
    """Decode one split greedily and with CTC prefix beam search + KenLM; score both.

    ``run_dir`` is the trained run (its checkpoint exists: ``trained_model`` in the catalog). Returns the hypotheses
    (JSONL: id, reference, greedy, beam_lm) and metrics in percent:
    ``{"greedy": {"wer", "cer"}, "beam_lm": {"wer", "cer"}, "utterances": N}``.
    """
    beam_params = {k: v for k, v in params.items() if k != "batch_size"}
    options = BeamSearchOptions(**beam_params)
    with tempfile.NamedTemporaryFile(suffix=".binary") as lm_file:
        lm_file.write(lm_binary)
        lm_file.flush()
        return decode_and_score(
            run_dir,
            feature_shards,
            tokenizer_model,
            options,
            lm=load_lm(lm_file.name),
            batch_size=int(params.get("batch_size", 16)),
        )
