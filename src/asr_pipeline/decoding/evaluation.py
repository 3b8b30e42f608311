"""Decode feature shards with a trained run, greedily and by beam search, and score both."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import kenlm
import torch

from asr_pipeline.decoding.beam_search import BeamSearchOptions, CTCPrefixBeamSearch
from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.inference import iter_log_probs
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.text.tokenizer import CTCTokenizer


def decode_and_score(
    run_dir: str | Path,
    feature_shards: Sequence[str],
    tokenizer_model: bytes,
    options: BeamSearchOptions,
    lm: kenlm.Model | None = None,
    batch_size: int = 16,
    beam_name: str = "beam_lm",
) -> tuple[str, dict]:
    """Decode every utterance of the shards with the run's model, greedily and by beam search; score both.

    Shared by the `evaluate` stage and ``asr-pipeline decode``. ``lm`` (None: acoustic-only beam search)
    is fused into the beam search; ``beam_name`` labels the beam hypotheses in both outputs. Returns the
    hypotheses (JSONL: id, reference, greedy, <beam_name>) and metrics in percent:
    ``{"utterances": N, "greedy": {"wer", "cer"}, <beam_name>: {"wer", "cer"}}``.
    """
    torch.manual_seed(0)
    run = load_run_model(run_dir)
    if run.output != "ctc":
        raise ValueError(
            f"{run_dir} holds a {run.architecture} model with a {run.output} decoder; decode_and_score "
            "decodes CTC log-probs only"
        )
    model = run.model
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=run.blank_id)
    searcher = CTCPrefixBeamSearch(options, tokenizer, lm)
    rows = []
    for batch in iter_log_probs(model, list(feature_shards), batch_size=batch_size):
        greedy = greedy_decode(batch.log_probs, batch.lengths, blank_id=tokenizer.blank_id)
        beams = searcher.decode_batch(batch.log_probs, batch.lengths)
        for utt_id, reference, greedy_ids, nbest in zip(batch.ids, batch.texts, greedy, beams, strict=True):
            rows.append(
                {
                    "id": utt_id,
                    "reference": reference,
                    "greedy": tokenizer.decode(greedy_ids),
                    beam_name: nbest[0].text if nbest else "",
                }
            )
    references = [row["reference"] for row in rows]
    metrics = {"utterances": len(rows)}
    for method in ("greedy", beam_name):
        rates = error_rates(references, [row[method] for row in rows])
        metrics[method] = {"wer": round(rates.wer, 3), "cer": round(rates.cer, 3)}
    hypotheses = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return hypotheses, metrics
