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

from asr_pipeline.io.report import SkipReport
from asr_pipeline.pron.g2p import G2P
from asr_pipeline.text.phones import phone_ids

PHONE_SCHEMA = {
    "id": pl.String,
    "text": pl.String,
    "words": pl.List(pl.String),
    "word_phones": pl.List(pl.Int32),
    "phones": pl.List(pl.String),
    "phone_ids": pl.List(pl.Int32),
}


def transcribe_to_phones(
    train_manifest: pl.DataFrame, dev_manifest: pl.DataFrame, test_manifest: pl.DataFrame, params: dict
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """The three splits' phone manifests (module docstring) and the report. ``params`` is params.yaml ``pron``;
    ``g2p.letter_to_sound: false`` leaves words CMUdict and the rules cannot answer to spelling out."""
    g2p_params = dict(params.get("g2p") or {})
    letter_to_sound = None if g2p_params.get("letter_to_sound", True) else (lambda word: [])
    g2p = G2P(letter_to_sound=letter_to_sound)
    tables, skips = [], {}
    for split, manifest in (("train", train_manifest), ("dev", dev_manifest), ("test", test_manifest)):
        report = SkipReport(strict=False)
        tables.append(_split_phones(manifest, g2p, report))
        skips[split] = report.to_dict()
    return (*tables, {"g2p": g2p.report.to_dict(), "utterances": skips})  # type: ignore[return-value]


def _split_phones(manifest: pl.DataFrame, g2p: G2P, report: SkipReport) -> pl.DataFrame:
    rows: dict[str, list] = {name: [] for name in PHONE_SCHEMA}
    for row in manifest.select("id", "text", "location").iter_rows(named=True):
        report.seen += 1
        words = (row["text"] or "").split()
        spelled = [g2p.word(word) for word in words]
        missing = [word for word, phones in zip(words, spelled, strict=True) if not phones]
        if not words or missing:
            report.skip(
                "no phones for a word", row["location"], f"{missing or 'no words'} in {row['text']!r}"
            )
            continue
        report.kept += 1
        phones = [phone for word_phones in spelled for phone in word_phones]
        rows["id"].append(row["id"])
        rows["text"].append(row["text"])
        rows["words"].append(words)
        rows["word_phones"].append([len(p) for p in spelled])
        rows["phones"].append(phones)
        rows["phone_ids"].append(phone_ids(phones))
    return pl.DataFrame(rows, schema=PHONE_SCHEMA)
