"""Nodes of the ``pron_aligner@<name>`` stage (one DVC stage per entry of params.yaml ``pron.aligners``).

An entry picks the aligner's input features and its training::

    mfcc:
      frontend: mfcc      # MFCC-39 (13 + deltas + delta-deltas); fbank: log-mel-80
      train: {model: {variant: default}, optim: {epochs: 10}}   # over params.yaml train (model: speech-aligner)

The transcripts' audio is featurized with that frontend (clean, no augmentation) into shards whose CTC targets
are the ``pron_phones`` stage's phone ids (``pron.aligner_data``); the SpeechAligner trains on train, validates on
dev, and its phone error rate is measured on test, whose voices neither saw. Layout under ``paths.pron``/aligners/
<name>: ``features/{train,dev,test}/``, ``run/`` and ``metrics.json`` (PER on dev and test, parameters, the best
epoch, training time; the GOP baseline: the aligner's goodness of pronunciation against the labels of the
pronunciation demo set's test split, Spearman and Pearson with bootstrap intervals per level; and the scoring
head trained on the set's train split once per CTC weight of ``scoring.ctc_weights``, default 0 and 0.5, with
the paired difference of their phone-level Spearman; ``scoring.representations`` adds a head on the encoder of
each run named there, an ASR or fine-tuned HuBERT run: the richer features). The aligner's frame-phone and
word-boundary heads then train on the train split's forced alignments (``pron.aligner_heads``; options under the
entry's ``heads``), scored on test's, and the whole aligner, its three heads trained, is written as
``aligner.safetensors`` (``pron.aligner_heads.load_aligner``). Where the test split's raw manifest names each
utterance's espeak-ng voice (the demo corpus), the heads' word starts and the forced alignment's are also scored
against the synthesizer's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from asr_pipeline.io.datasets import Manifest
from asr_pipeline.iterations import iteration_params
from asr_pipeline.pron.aligner_stage import train_aligner_entry


def aligner_entry(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The aligner this stage trains (``pron.current``) and its entry of ``pron.aligners``."""
    return iteration_params(params, "pron", "pron_aligner", entries="aligners")


def train_aligner(
    train_manifest: pl.DataFrame,
    dev_manifest: pl.DataFrame,
    test_manifest: pl.DataFrame,
    train_phones: pl.DataFrame,
    dev_phones: pl.DataFrame,
    test_phones: pl.DataFrame,
    test_raw_manifest: Manifest,
    tokenizer_model: bytes,
    features_params: dict,
    tokenizer_params: dict,
    train_params: dict[str, Any],
    params: dict[str, Any],
    pron_dir: Path,
    pron_demo_dir: Path,
) -> None:
    """Featurize, train the aligner through torchrun and measure it (``pron.aligner_stage.train_aligner_entry``).
    Its metrics go to ``aligners/<name>/metrics.json`` (a DVC metric), not through the catalog: the node declares
    no outputs."""
    name, entry = aligner_entry(params)
    train_aligner_entry(
        name,
        entry,
        pron_dir / "aligners" / name,
        {
            "train": (train_manifest, train_phones),
            "dev": (dev_manifest, dev_phones),
            "test": (test_manifest, test_phones),
        },
        test_raw_manifest,
        (tokenizer_model, features_params, tokenizer_params),
        train_params,
        pron_demo_dir,
    )


__all__ = ["aligner_entry", "train_aligner"]
