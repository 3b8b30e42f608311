"""Phone targets of transcripts: every word of every utterance through ``pron.g2p``, as the phone manifests the
pronunciation aligner trains on (the ``pron_phones`` stage).

A phone manifest has ``id``, ``text``, ``words`` (list), ``word_phones`` (phones per word, so word boundaries
are known), ``phones`` (ARPABET, stress-free) and ``phone_ids`` (``text.phones``: blank 0, SIL 1, phones 2-40).
An utterance with a word no G2P stage could resolve has no honest target: it is skipped, counted and named in
the report, which also counts the words each G2P stage answered.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def phone_manifests(
    manifests: Mapping[str, pl.DataFrame], letter_to_sound: bool = True
) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """Each split's phone manifest, and the report: the G2P's answers per stage and each split's skips.
    ``letter_to_sound`` False leaves words CMUdict and the rules cannot answer to spelling out."""
    g2p = G2P(letter_to_sound=None if letter_to_sound else (lambda word: []))
    tables, skips = {}, {}
    for split, manifest in manifests.items():
        report = SkipReport(strict=False)
        tables[split] = phone_table(manifest, g2p, report)
        skips[split] = report.to_dict()
    return tables, {"g2p": g2p.report.to_dict(), "utterances": skips}


def phone_table(manifest: pl.DataFrame, g2p: G2P, report: SkipReport) -> pl.DataFrame:
    """``manifest``'s utterances (id, text, location) with their words' phones (PHONE_SCHEMA); one with a word
    ``g2p`` cannot spell, or with no words, is skipped into ``report`` naming its location."""
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


__all__ = ["PHONE_SCHEMA", "phone_manifests", "phone_table"]
