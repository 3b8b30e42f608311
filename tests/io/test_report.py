"""SkipReport: skips counted by reason, notes on kept records, and the error when nothing was kept."""

import pytest

from asr_pipeline.io.report import InputError, NothingKeptError, SkipReport


def test_notes_report_count_and_share_of_the_kept_records_and_are_not_skips():
    report = SkipReport(seen=4, kept=4)
    report.note("unknown pieces")
    report.note("unknown pieces")
    report.note("other note", 0)

    summary = report.to_dict()

    assert summary["kept_with"] == {
        "other note": {"count": 0, "share": 0.0},
        "unknown pieces": {"count": 2, "share": 0.5},
    }
    assert summary["skipped"] == 0 and summary["kept"] + summary["skipped"] == summary["seen"]
    assert "kept_with" not in SkipReport().to_dict(), "reports without notes keep their old keys"


def test_nothing_kept_names_every_reason_with_its_count_and_first_location():
    report = SkipReport(seen=3)
    report.skip("missing file", "m.jsonl:1", "a.wav not found")
    report.skip("missing file", "m.jsonl:2")
    report.skip("silent audio", "m.jsonl:3")

    with pytest.raises(NothingKeptError) as error:
        report.require_kept("feature extraction")

    message = str(error.value)
    assert message.startswith("feature extraction: all 3 records were skipped, so nothing was written")
    assert "missing file: 2, silent audio: 1" in message
    assert "m.jsonl:1: missing file (a.wav not found); m.jsonl:3: silent audio" in message
    assert isinstance(error.value, InputError), "the CLI shows it as one line, exit 1"


def test_nothing_kept_from_no_records_says_the_input_was_empty():
    with pytest.raises(NothingKeptError, match="the input holds no records"):
        SkipReport().require_kept("feature extraction")
    SkipReport(seen=1, kept=1).require_kept("feature extraction")  # anything kept: no error
