"""Tiny factories shared by test folders: random-feature shards whose targets are a tokenizer's encoding
of random words, so a trained model's decoding can be scored as text."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from asr_pipeline.io.shards import records_to_table, write_shard
from asr_pipeline.text.tokenizer import CTCTokenizer

NUM_BINS = 16  # F; small enough for a fast tiny model


def random_sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(
            "".join(rng.choice("abcde") for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 2))
        )
        for _ in range(count)
    ]


def write_corpus_shard(path: Path, tokenizer: CTCTokenizer, count: int, seed: int, prefix: str) -> Path:
    """``count`` examples of 60..120 random frames (15..30 output frames after 4x subsampling)."""
    rng = np.random.default_rng(seed)
    records = []
    for i, text in enumerate(random_sentences(count, seed)):
        frames = int(rng.integers(60, 121))
        records.append(
            {
                "id": f"{prefix}-{i:03d}",
                "features": rng.standard_normal((frames, NUM_BINS)),
                "tokens": tokenizer.encode(text),
                "duration_ms": 10 * frames,
                "text": text,
            }
        )
    write_shard(records_to_table(records), path)
    return path


def char_tokenizer_model() -> bytes:
    """A character SentencePiece model over the letters ``random_sentences`` uses."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(random_sentences(200, seed=0)),
        model_writer=model,
        vocab_size=12,
        model_type="char",
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return model.getvalue()
