"""Nodes of the `pron_phones` stage: the transcripts stage's manifests, every word through ``pron.g2p``.

The phone manifests are the pronunciation aligner's CTC targets (it pretrains on the demo ASR corpus this way):
``id``, ``text``, ``words`` (list), ``word_phones`` (phones per word, so word boundaries are known),
``phones`` (ARPABET, stress-free) and ``phone_ids`` (``text.phones``: blank 0, SIL 1, phones 2-40). An
utterance with a word no stage could resolve has no honest target: it is skipped, counted and named in the
report, which also counts the words each G2P stage answered (``data/metrics/pron_g2p.json``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from asr_pipeline.pron.phone_manifests import PHONE_SCHEMA, phone_manifests


def transcribe_to_phones(
    train_manifest: pl.DataFrame, dev_manifest: pl.DataFrame, test_manifest: pl.DataFrame, params: dict
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """The three splits' phone manifests (module docstring; ``pron.phone_manifests``) and the report. ``params``
    is params.yaml ``pron``; ``g2p.letter_to_sound: false`` leaves words CMUdict and the rules cannot answer to
    spelling out."""
    letter_to_sound = bool(dict(params.get("g2p") or {}).get("letter_to_sound", True))
    manifests = {"train": train_manifest, "dev": dev_manifest, "test": test_manifest}
    tables, report = phone_manifests(manifests, letter_to_sound)
    return tables["train"], tables["dev"], tables["test"], report


__all__ = ["PHONE_SCHEMA", "transcribe_to_phones"]
