"""Batches for a pretrained speech model: features stacked, prompt + transcript padded, labels masked.

Every utterance becomes one token sequence ``prompt + transcript + end`` (``models``: Whisper's language and
task tokens, or Voxtral's transcription instruction with one ``[AUDIO]`` per audio embedding). ``labels`` is
that sequence with the prompt and the padding replaced by -100, so the loss counts exactly the transcript
and its end token: ``labels[b, i]`` is the token at position i, predicted from positions < i (``loss``
shifts). Dimensions: B utterances, L the longest sequence, F mel bins, T frames of one 30 s window, W the
windows of all utterances together (Voxtral; W = B for Whisper).

Training pads on the right. Generation pads prompts on the left (``for_generation``), so that every row's
first new token follows its own last prompt token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from asr_pipeline.hf_finetune.models import ModelFamily

IGNORE_INDEX = -100  # torch's cross_entropy default ignore_index, and transformers' label convention


@dataclass
class SpeechCollator:
    tokenizer: Any
    family: ModelFamily
    frames_per_window: int  # the feature extractor's nb_max_frames
    language: str | None = "en"
    task: str = "transcribe"
    for_generation: bool = False

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return self.tokenizer.eos_token_id if pad is None else pad

    def target_ids(self, text: str) -> list[int]:
        return [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        windows = []  # per utterance: (w, F, T) with w whole windows
        for example in examples:
            features = example["features"]  # (w * T, F)
            w = features.shape[0] // self.frames_per_window
            windows.append(features.reshape(w, self.frames_per_window, -1).transpose(0, 2, 1))
        prompts = [self.family.prompt_ids(self.tokenizer, len(w), self.language, self.task) for w in windows]
        if self.for_generation:
            sequences, prompt_lengths = prompts, [len(p) for p in prompts]
        else:
            sequences = [p + self.target_ids(e["text"]) for p, e in zip(prompts, examples, strict=True)]
            prompt_lengths = [len(p) for p in prompts]
        longest = max(map(len, sequences))
        input_ids = torch.full((len(sequences), longest), self.pad_id, dtype=torch.long)  # (B, L)
        attention_mask = torch.zeros((len(sequences), longest), dtype=torch.long)
        labels = torch.full((len(sequences), longest), IGNORE_INDEX, dtype=torch.long)
        for b, (sequence, prompt_length) in enumerate(zip(sequences, prompt_lengths, strict=True)):
            start = longest - len(sequence) if self.for_generation else 0
            input_ids[b, start : start + len(sequence)] = torch.tensor(sequence)
            attention_mask[b, start : start + len(sequence)] = 1
            labels[b, prompt_length : len(sequence)] = input_ids[b, prompt_length : len(sequence)]
        return {
            "ids": [e["id"] for e in examples],
            "texts": [e["text"] for e in examples],
            "input_features": torch.from_numpy(np.concatenate(windows)),  # (W, F, T)
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "labels": labels,  # (B, L): -100 on the prompt and the padding
        }


__all__ = ["IGNORE_INDEX", "SpeechCollator"]
