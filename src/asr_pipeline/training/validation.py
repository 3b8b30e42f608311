"""Validation after every epoch: each rank greedy-decodes its share of the validation batches, rank 0
gathers and scores them all."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader

from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import TrainConfig
from asr_pipeline.training.ctc import ctc_losses
from asr_pipeline.training.distributed import DistributedContext, gather


def validate(
    model: nn.Module,
    loader: DataLoader,
    config: TrainConfig,
    ctx: DistributedContext,
    tokenizer: CTCTokenizer | None,
) -> dict[str, float] | None:
    """Greedy-decode this rank's share, gather every rank's results, score on rank 0 (None elsewhere).

    Without a tokenizer, hypotheses and references are compared as strings of token ids, so "WER" is a
    token error rate and "CER" counts digits; set run.tokenizer for real rates.
    """
    was_training = model.training
    model.eval()
    results = []
    with torch.no_grad():
        for batch in loader:
            batch = batch.to(ctx.device)
            losses, log_probs, out_lengths = ctc_losses(model, batch, config)
            hypotheses = greedy_decode(log_probs.float(), out_lengths, blank_id=config.model.blank_id)
            for b, hypothesis in enumerate(hypotheses):
                reference_ids = batch.targets[b, : batch.target_lengths[b]].tolist()
                if tokenizer is not None:
                    reference, text = batch.texts[b], tokenizer.decode(hypothesis)
                else:
                    reference, text = " ".join(map(str, reference_ids)), " ".join(map(str, hypothesis))
                results.append((batch.ids[b], reference, text, float(losses[b]), len(reference_ids)))
    model.train(was_training)
    gathered = gather(results)
    if not ctx.is_main:
        return None
    # Keyed by utterance id: drops the repeats that "pad" gave some ranks.
    unique = {result[0]: result for rank_results in gathered for result in rank_results}
    ordered = [unique[utterance] for utterance in sorted(unique)]
    rates = error_rates([r[1] for r in ordered], [r[2] for r in ordered])
    tokens = sum(r[4] for r in ordered)
    return {
        "val_loss": sum(r[3] for r in ordered) / max(tokens, 1),
        "val_cer": rates.cer,
        "val_wer": rates.wer,
        "utterances": len(ordered),
        "words": rates.words,
        "chars": rates.chars,
    }


__all__ = ["validate"]
