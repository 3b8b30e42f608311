"""Nodes of the `evaluate` stage."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import kenlm
import torch

from asr_pipeline.decoding.beam_search import BeamSearchOptions, CTCPrefixBeamSearch, load_lm
from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.inference import iter_log_probs
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.checkpoint import load_model_from_run


def evaluate_split(
    run_dir: Path,
    training_metrics: dict,
    feature_shards: list[str],
    tokenizer_model: bytes,
    lm_binary: bytes,
    params: dict,
) -> tuple[str, dict]:
    """Decode one split greedily and with CTC prefix beam search + KenLM; score both.

    ``training_metrics`` is taken only to order this node after training. Returns the hypotheses
    (JSONL: id, reference, greedy, beam_lm) and metrics in percent:
    ``{"greedy": {"wer", "cer"}, "beam_lm": {"wer", "cer"}, "utterances": N}``.
    """
    del training_metrics
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

    Shared by the `evaluate` node and ``asr-pipeline decode``. ``lm`` (None: acoustic-only beam search)
    is fused into the beam search; ``beam_name`` labels the beam hypotheses in both outputs. Returns the
    hypotheses (JSONL: id, reference, greedy, <beam_name>) and metrics in percent:
    ``{"utterances": N, "greedy": {"wer", "cer"}, <beam_name>: {"wer", "cer"}}``.
    """
    torch.manual_seed(0)
    model, config = load_model_from_run(run_dir)
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=config.model.blank_id)
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
