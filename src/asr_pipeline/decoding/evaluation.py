"""Decode feature shards with a trained run, with any set of decoders at once, and score each.

Shared by the `evaluate` and `tune_decoding` stages and ``asr-pipeline decode``: the acoustic model runs once
per batch and every decoder reads the same log-probs, so decoders compare on equal terms.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from asr_pipeline.decoding.decoders import Decoder, GreedyDecoder
from asr_pipeline.decoding.inference import BatchOutput, iter_log_probs
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.decoding.options import DECODERS, DecodingOptions
from asr_pipeline.models.loading import RunModel, load_run_model
from asr_pipeline.models.spec import has_frame_posteriors
from asr_pipeline.options import options_from_dict
from asr_pipeline.run_layout import DEFAULT_WEIGHTS, check_weights
from asr_pipeline.text.tokenizer import CTCTokenizer

WEIGHTS_PARAM = "params.yaml decoding.weights"  # what a stage's error about its weights names


def load_run(
    run_dir: str | Path,
    checkpoint: Literal["latest", "best"] = "latest",
    weights: str = DEFAULT_WEIGHTS,
    weights_option: str = "--weights",
) -> RunModel:
    """The run's model in eval mode: CTC (frame log-probs, every decoder) or Paraformer-style (token
    posteriors of one parallel decoder pass: the greedy decoder, without CTC collapse). ``weights``: the
    checkpoint's raw weights or an average kept beside them, chosen by ``weights_option``
    (``models.loading.load_run_model``)."""
    torch.manual_seed(0)
    return load_run_model(run_dir, checkpoint, weights, weights_option)


def greedy_decoder(run: RunModel, tokenizer: CTCTokenizer) -> GreedyDecoder:
    """Best path for a CTC run; for a Paraformer run the argmax of each token position (no collapse)."""
    return GreedyDecoder(DecodingOptions(), tokenizer, collapse=has_frame_posteriors(run.output))


def beam_decoders_skipped(run: RunModel, names: Iterable[str]) -> dict[str, str]:
    """The beam decoders a run cannot use, each with the reason (none for a run with frame posteriors)."""
    if has_frame_posteriors(run.output):
        return {}
    reason = (
        f"a {run.architecture} run decodes in one parallel pass over per-token posteriors; the CTC beam "
        "searches read frame posteriors"
    )
    return {name: reason for name in names}


def run_log_probs(
    run: RunModel, feature_shards: Sequence[str], batch_size: int = 16
) -> Iterable[BatchOutput]:
    """The run's log-probs for every utterance of the shards, batch by batch (a generator)."""
    return iter_log_probs(run.model, list(feature_shards), batch_size=batch_size)


def decode_and_score(batches: Iterable[BatchOutput], decoders: Mapping[str, Decoder]) -> tuple[str, dict]:
    """Decode every batch with every decoder; score each against the references.

    Returns the hypotheses (JSONL: id, reference, then one field per decoder name) and metrics in percent:
    ``{"utterances": N, <name>: {"wer", "cer"}, ...}``; no batches (an empty optional split, the open test
    set a corpus lacks): ``{"utterances": 0}``, since error rates over no words are undefined.
    """
    rows = []
    for batch in batches:
        decoded = {
            name: decoder.decode_batch(batch.log_probs, batch.lengths) for name, decoder in decoders.items()
        }
        for index, (utt_id, reference) in enumerate(zip(batch.ids, batch.texts, strict=True)):
            row = {"id": utt_id, "reference": reference}
            for name, n_bests in decoded.items():
                row[name] = n_bests[index][0].text if n_bests[index] else ""
            rows.append(row)
    references = [row["reference"] for row in rows]
    metrics: dict = {"utterances": len(rows)}
    for name in decoders if rows else ():
        rates = error_rates(references, [row[name] for row in rows])
        metrics[name] = {"wer": round(rates.wer, 3), "cer": round(rates.cer, 3)}
    hypotheses = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return hypotheses, metrics


@dataclass(frozen=True)
class EvaluationParams:
    """params.yaml ``decoding``: which weights of the trained run both stages load (``weights``:
    ``run_layout.WEIGHTS_HELP``), the beam, which decoders `evaluate` scores besides greedy, and the grid
    `tune_decoding` searches on dev for each (decoder name -> option -> values)."""

    weights: str = DEFAULT_WEIGHTS
    batch_size: int = 16
    beam_width: int = 16
    beam_threshold: float = 25.0
    decoders: tuple[str, ...] = ("lexicon", "lexicon_free")
    tune: Mapping[str, Mapping[str, Sequence[float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "decoders", tuple(self.decoders))
        check_weights(self.weights, WEIGHTS_PARAM)
        bad = [name for name in self.decoders if name not in DECODERS or name == "greedy"]
        if bad:
            raise ValueError(
                f"params.yaml decoding.decoders: {bad} are not beam decoders; choose from "
                f"{[name for name in DECODERS if name != 'greedy']} (greedy is always scored)"
            )
        unknown = sorted(set(self.tune) - set(self.decoders))
        if unknown:
            raise ValueError(
                f"params.yaml decoding.tune names {unknown}, which decoding.decoders does not list"
            )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> EvaluationParams:
        return options_from_dict(cls, raw, "params.yaml decoding")

    def load_run(self, run_dir: str | Path) -> RunModel:
        """The trained run with the weights ``weights`` chooses (``load_run``)."""
        return load_run(run_dir, weights=self.weights, weights_option=WEIGHTS_PARAM)

    def base_options(self, decoder: str) -> DecodingOptions:
        return DecodingOptions(
            decoder=decoder, beam_width=self.beam_width, beam_threshold=self.beam_threshold
        )
