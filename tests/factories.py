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


def untrained_run(root: Path) -> Path:
    """``root/run``: a run dir of the tiny squeezeformer (untrained, NUM_BINS fbank bins, a character tokenizer)
    with its config, tokenizer and a step-0 checkpoint; ``root/shards`` holds the 4 examples it names. For tests
    of paths and plumbing, not accuracy."""
    from asr_pipeline.run_layout import CONFIG_FILE, TOKENIZER_FILE
    from asr_pipeline.training.checkpoint import build_model_from_config, save_checkpoint
    from asr_pipeline.training.config import resolve_config, save_json

    model_bytes = char_tokenizer_model()
    tokenizer = CTCTokenizer(model_bytes)
    (root / "shards").mkdir(parents=True, exist_ok=True)
    shard = write_corpus_shard(root / "shards" / "shard-00000.parquet", tokenizer, 4, seed=1, prefix="u")
    run_dir = root / "run"
    config = resolve_config(
        {
            "data": {"train_manifests": [str(shard)], "input_dim": NUM_BINS},
            "model": {"variant": "tiny"},
            "run": {"output_dir": str(run_dir), "tokenizer": str(run_dir / TOKENIZER_FILE)},
        }
    )
    model, model_config = build_model_from_config(config, tokenizer.vocab_size)
    save_checkpoint(run_dir, model=model, training_state=None, step=0, epoch=0, model_config=model_config)
    save_json(config, run_dir / CONFIG_FILE)
    (run_dir / TOKENIZER_FILE).write_bytes(model_bytes)
    return run_dir


def add_weight_averages(run_dir: Path, files: tuple[str, ...] = ("averaged.safetensors",)) -> dict[str, dict]:
    """Write ``files`` (weight averages, ``run_layout.WEIGHTS``) beside ``run_dir``'s latest weights, each the
    weights plus a different offset, in float64 as training writes the running average; returns file -> its
    state dict as the model loads it (float32). For tests of which file a command loads."""
    from safetensors.torch import load_file, save_file

    from asr_pipeline.run_layout import WEIGHTS_FILE, committed_dir

    folder = committed_dir(run_dir)
    raw = load_file(folder / WEIGHTS_FILE)
    written = {}
    for offset, file in enumerate(files, start=1):
        average = {
            name: (value.double() + 0.1 * offset if value.is_floating_point() else value)
            for name, value in raw.items()
        }
        save_file(average, folder / file)
        written[file] = {name: value.to(raw[name].dtype) for name, value in average.items()}
    return written
