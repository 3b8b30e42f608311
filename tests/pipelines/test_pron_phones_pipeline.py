"""The pron_phones stage on an in-memory catalog: each split's transcripts become phone targets with word
boundaries and CTC ids, words outside CMUdict go through the fallback chain (counted), and an utterance with
a word nothing could spell is skipped and named, never given a wrong target."""

from __future__ import annotations

import polars as pl

from asr_pipeline.pipelines.pron_phones.pipeline import create_pipeline
from asr_pipeline.text.phones import PHONE_IDS

from .conftest import run_stage


def manifest(rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [r[0] for r in rows],
            "text": [r[1] for r in rows],
            "location": [f"m.jsonl:{i + 1}" for i in range(len(rows))],
        }
    )


def test_transcripts_become_phone_targets_and_the_g2p_report_counts_the_stages(project_params):
    inputs = {
        "train.manifest": manifest([("t1", "the cat sat"), ("t2", "kedro's 42 pipelines")]),
        "dev.manifest": manifest([("d1", "speech %")]),  # "%" has no letter or digit: no phones
        "test.manifest": manifest([("e1", "well-known words")]),
    }

    catalog = run_stage(create_pipeline(), inputs, params={"pron": project_params["pron"]})

    train = catalog.load("train.phones")
    first = train.row(0, named=True)
    assert first["words"] == ["the", "cat", "sat"] and first["word_phones"] == [2, 3, 3]
    assert first["phones"] == ["DH", "AH", "K", "AE", "T", "S", "AE", "T"]
    assert first["phone_ids"] == [PHONE_IDS[p] for p in first["phones"]]
    assert train["id"].to_list() == ["t1", "t2"]
    assert catalog.load("dev.phones").height == 0
    report = catalog.load("pron_g2p_report")
    assert report["utterances"]["dev"]["skipped_by_reason"] == {"no phones for a word": 1}
    assert "m.jsonl:1" in report["utterances"]["dev"]["first_skipped"]["no phones for a word"][0]
    stages = report["g2p"]["by_stage"]
    assert stages["number"] == 1 and stages["unresolved"] == 1 and stages["dictionary"] >= 6
    assert stages.get("possessive", 0) + stages.get("letter_to_sound", 0) >= 1  # kedro's: not in CMUdict
