"""WER/CER of a pretrained (or fine-tuned) model's ``generate()`` on cached features.

The same scores as ``evaluate`` gives our own models (``decoding.metrics.error_rates``: corpus-level,
words split on whitespace, characters after spaces are normalized), so a table can hold both. Greedy
decoding, batch by batch, with the prompt of training (``collate``, left-padded).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch

from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.hf_finetune.collate import SpeechCollator
from asr_pipeline.hf_finetune.features import FeatureShards
from asr_pipeline.hf_finetune.models import Pretrained


@torch.no_grad()
def transcribe_shards(
    pretrained: Pretrained,
    shards: FeatureShards,
    *,
    language: str | None = "en",
    task: str = "transcribe",
    batch_size: int = 8,
    max_new_tokens: int = 128,
) -> list[dict[str, str]]:
    """``{"id", "reference", "hypothesis"}`` per utterance, in the shards' order."""
    model, tokenizer = pretrained.model, pretrained.tokenizer
    model.eval()
    device = next(model.parameters()).device
    collator = SpeechCollator(tokenizer, pretrained.family, pretrained.feature_extractor.nb_max_frames,
                              language, task, for_generation=True)  # fmt: skip
    rows = []
    for start in range(0, len(shards), batch_size):
        batch = collator([shards[i] for i in range(start, min(start + batch_size, len(shards)))])
        batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
        batch["input_features"] = batch["input_features"].to(model.dtype)
        generated = pretrained.family.generate(model, batch, max_new_tokens)
        texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
        rows += [{"id": i, "reference": r, "hypothesis": " ".join(h.split())}
                 for i, r, h in zip(batch["ids"], batch["texts"], texts, strict=True)]  # fmt: skip
    return rows


def score(rows: list[dict[str, str]]) -> dict[str, Any]:
    """WER and CER (percent) with their counts, of ``transcribe_shards``' rows."""
    rates = error_rates([r["reference"] for r in rows], [r["hypothesis"] for r in rows])
    return {**asdict(rates), "utterances": len(rows)}


__all__ = ["score", "transcribe_shards"]
