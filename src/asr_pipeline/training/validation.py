"""Validation: each rank decodes its share of the validation batches, rank 0 gathers and scores them all.

Runs after every epoch and, with ``validation.every_steps``, every that many optimizer steps. Decoding is
greedy (best path) unless ``validation.decoding.decoder`` names a beam decoder (``decoding.decoders``: the
flashlight lexicon or lexicon-free search with KenLM, as the `evaluate` stage decodes, or our prefix beam
search), so a validation CER can predict the evaluated one.

Scoring is corpus-level (``decoding.metrics``). The validation sampler pads uneven ranks by repeating
utterances; results are keyed by utterance id, so every utterance is scored exactly once.

A model without text output (HuBERT pretraining, spec output "hubert") is scored on its task instead:
``val_loss`` per predicted frame and ``val_accuracy``, the share of masked frames whose unit it predicts
(its masks in eval mode come from a fixed seed, so every validation, and every checkpoint, sees the same).
Its best checkpoint is the lowest ``val_loss`` (``validation_metrics``).

Validation leaves training untouched: it draws nothing from the global RNG (the loaders own their
generators, ``training.loaders``; eval mode has no dropout), so adding mid-epoch validations does not
change the weights a run ends with (tests/training/test_validation.py checks this).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from asr_pipeline.decoding.decoders import Decoder, DecodingResources
from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import TrainConfig, ValidationConfig
from asr_pipeline.training.ctc import OBJECTIVES, decoding_outputs, model_losses, objective_of, output_kind
from asr_pipeline.training.distributed import DistributedContext, gather


@dataclass(frozen=True)
class _Decoded:
    """One validation utterance as decoded on its rank; plain values, so it pickles for ``gather``."""

    id: str
    reference: str
    hypothesis: str
    loss: float
    reference_tokens: int
    n_best: tuple[tuple[str, float], ...]  # (text, score) best first; empty for greedy decoding


class ValidationDecoder:
    """Turns a batch's log-probs into text with the decoder ``validation.decoding`` names.

    Built once per run: loading a KenLM model or a lexicon can take seconds (and memory), so it is not
    reloaded per validation. Without a tokenizer the hypotheses are strings of token ids (greedy only), so
    "WER" is a token error rate and "CER" counts digits; set run.tokenizer for real rates.
    """

    def __init__(
        self, options: ValidationConfig, tokenizer: CTCTokenizer | None, blank_id: int, output: str = "ctc"
    ) -> None:
        self.blank_id, self.tokenizer = blank_id, tokenizer
        # a Paraformer's outputs are per token: no CTC collapse, no beam search over frames
        self.collapse = OBJECTIVES[output].frame_posteriors
        self.method = "beam" if options.uses_beam_search else "greedy"
        self.decoder: Decoder | None = None
        if options.uses_beam_search and not self.collapse:
            raise ValueError(
                f"the {options.decoding.decoder} validation decoder searches CTC frame posteriors; a {output} "
                "model's decoder outputs one posterior per token: validate it greedily (unset "
                "validation.decoding.decoder / --val-decoder)"
            )
        if options.uses_beam_search:
            if tokenizer is None:
                raise ValueError(
                    f"the {options.decoding.decoder} validation decoder needs run.tokenizer (--tokenizer): beam "
                    "search works on word pieces; unset validation.decoding.decoder to validate greedily"
                )
            resources = DecodingResources(
                word_lm=options.lm_path, token_lm=options.lm_path, lexicon=options.lexicon_path
            )
            self.decoder = resources.build(options.decoding, tokenizer)

    def decode(
        self, log_probs: torch.Tensor, lengths: torch.Tensor
    ) -> list[tuple[str, tuple[tuple[str, float], ...]]]:
        """(B, T', V) log-probs and (B,) lengths -> per utterance: the best text and its n-best list."""
        if self.decoder is not None:
            decoded = []
            for n_best in self.decoder.decode_batch(log_probs.float().cpu(), lengths.cpu()):
                texts = tuple((h.text, h.score) for h in n_best)
                decoded.append((texts[0][0] if texts else "", texts))
            return decoded
        best = greedy_decode(log_probs.float(), lengths, blank_id=self.blank_id, collapse=self.collapse)
        if self.tokenizer is None:
            return [(" ".join(map(str, ids)), ()) for ids in best]
        return [(self.tokenizer.decode(ids), ()) for ids in best]


def validation_metrics(architecture: str) -> tuple[str, str]:
    """The two scores a run's metrics and best checkpoints carry, the one that picks the best (lower is
    better) first: ("val_cer", "val_wer"), or ("val_loss", "val_accuracy") for a model without text output."""
    return objective_of(architecture).metrics


def validate(
    model: nn.Module,
    loader: DataLoader,
    config: TrainConfig,
    ctx: DistributedContext,
    tokenizer: CTCTokenizer | None,
    decoder: ValidationDecoder | None = None,
) -> dict[str, Any] | None:
    """Collective. Decode this rank's share, gather every rank's results, score on rank 0 (None elsewhere).

    ``decoder``: built from ``config.validation`` when not given (pass one to reuse a loaded LM). The
    scores: ``val_loss`` (per target token), ``val_cer``/``val_wer`` (percent), ``utterances``, ``words``,
    ``chars``, ``decoding`` ("greedy" or "beam"), ``duration_sec``, and with
    ``validation.log_samples`` a ``samples`` list (see ``_samples``).
    """
    started = time.perf_counter()
    if not objective_of(config.model.architecture).text_output:
        return _validate_units(model, loader, config, ctx, started)
    decoder = decoder or ValidationDecoder(
        config.validation, tokenizer, config.model.blank_id, output_kind(config.model.architecture)
    )
    was_training = model.training
    model.eval()
    results: list[_Decoded] = []
    with torch.no_grad():
        for batch in loader:
            if len(batch) == 0:  # every example's audio failed to decode (data.collate): nothing to score
                continue
            batch = batch.to(ctx.device)
            step = model_losses(model, batch, config)
            losses = step.losses  # (B,)
            log_probs, out_lengths = decoding_outputs(model, batch, config, step)  # (B, T' or U, V), (B,)
            # One device-to-host copy per batch, not one per utterance.
            batch_losses, targets = losses.tolist(), batch.targets.cpu()
            target_lengths = batch.target_lengths.tolist()
            for b, (text, n_best) in enumerate(decoder.decode(log_probs, out_lengths)):
                reference_ids = targets[b, : target_lengths[b]].tolist()
                reference = batch.texts[b] if tokenizer is not None else " ".join(map(str, reference_ids))
                results.append(
                    _Decoded(batch.ids[b], reference, text, batch_losses[b], len(reference_ids), n_best)
                )
    model.train(was_training)
    gathered = gather(results)
    if not ctx.is_main:
        return None
    # Keyed by utterance id: drops the repeats that "pad" gave some ranks.
    unique = {result.id: result for rank_results in gathered for result in rank_results}
    ordered = [unique[utterance] for utterance in sorted(unique)]
    rates = error_rates([r.reference for r in ordered], [r.hypothesis for r in ordered])
    tokens = sum(r.reference_tokens for r in ordered)
    scores: dict[str, Any] = {
        "val_loss": sum(r.loss for r in ordered) / max(tokens, 1),
        "val_cer": rates.cer,
        "val_wer": rates.wer,
        "utterances": len(ordered),
        "words": rates.words,
        "chars": rates.chars,
        "decoding": decoder.method,
        "duration_sec": time.perf_counter() - started,
    }
    if config.validation.log_samples:
        scores["samples"] = _samples(
            ordered[: config.validation.log_samples], config.validation.decoding.n_best
        )
    return scores


def _validate_units(
    model: nn.Module, loader: DataLoader, config: TrainConfig, ctx: DistributedContext, started: float
) -> dict[str, Any] | None:
    """Collective. ``validate`` for masked unit prediction: per utterance its loss and counts, gathered."""
    was_training = model.training
    model.eval()
    results: dict[str, tuple[float, int, int, int]] = {}  # id -> loss, predicted, masked, correct frames
    with torch.no_grad():
        for batch in loader:
            if len(batch) == 0:
                continue
            step = model_losses(model, batch.to(ctx.device), config)
            assert step.tokens is not None
            rows = zip(
                step.losses.tolist(), step.tokens.tolist(),
                step.counts["masked_frames"].tolist(), step.counts["correct_masked"].tolist(), strict=True,
            )  # fmt: skip
            results.update(zip(batch.ids, rows, strict=True))
    model.train(was_training)
    gathered = gather(results)
    if not ctx.is_main:
        return None
    unique = {utterance: row for rank_results in gathered for utterance, row in rank_results.items()}
    loss, predicted, masked, correct = (sum(column) for column in zip(*unique.values(), strict=True))
    return {
        "val_loss": loss / max(predicted, 1),
        "val_accuracy": 100.0 * correct / max(masked, 1),
        "utterances": len(unique),
        "masked_frames": masked,
        "decoding": "none",
        "duration_sec": time.perf_counter() - started,
    }


def _samples(results: list[_Decoded], n_best: int) -> list[dict[str, Any]]:
    """The first utterances by id: the same ones at every validation, so a reader watches them improve."""
    samples = []
    for result in results:
        sample: dict[str, Any] = {
            "id": result.id,
            "reference": result.reference,
            "hypothesis": result.hypothesis,
        }
        if n_best > 1:
            sample["n_best"] = [{"text": text, "score": score} for text, score in result.n_best]
        samples.append(sample)
    return samples


__all__ = ["ValidationDecoder", "validate", "validation_metrics"]
