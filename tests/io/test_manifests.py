import json

import pytest

from asr_pipeline.io.manifests import iter_manifest, parse_tokens
from asr_pipeline.io.report import InputError, SkipReport
from tests.conftest import make_wav


def test_jsonl_paths_resolve_against_the_manifest_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    manifest = tmp_path / "sub" / "dev.jsonl"
    manifest.write_text(
        json.dumps({"id": "a", "audio_path": "audio/a.wav", "text": "hello"})
        + "\n\n"
        + json.dumps({"audio_path": "audio/b.wav", "sentence": "world", "targets": "3, 4 5"})
        + "\n"
    )
    records = list(iter_manifest(manifest, SkipReport()))
    assert [r.id for r in records] == ["a", "b"]
    assert records[0].audio_path == str(tmp_path / "sub" / "audio" / "a.wav")
    assert records[1].text == "world"
    assert records[1].tokens == (3, 4, 5)
    assert records[1].location == f"{manifest}:3"


def test_bom_and_crlf_are_tolerated(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "audio_path": "a.wav", "text": "hi"}\r\n')
    assert [r.text for r in iter_manifest(manifest, SkipReport())] == ["hi"]


def test_malformed_json_line_is_counted_with_its_location(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a", "audio_path": "a.wav", "text": "hi"}\n{"id": "b", \n')
    report = SkipReport()
    assert len(list(iter_manifest(manifest, report))) == 1
    summary = report.to_dict()
    assert summary["skipped_by_reason"] == {"malformed JSON": 1}
    assert summary["first_skipped"]["malformed JSON"][0].startswith(f"{manifest}:2")


def test_strict_mode_stops_at_the_first_bad_line(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a", "tokens": "1 x"}\n')
    with pytest.raises(InputError, match=r"m\.jsonl:1: invalid tokens"):
        list(iter_manifest(manifest, SkipReport(strict=True)))


def test_audio_folder_pairs_audio_with_sidecars(tmp_path):
    (tmp_path / "spk1").mkdir()
    (tmp_path / "spk1" / "u1.wav").write_bytes(make_wav())
    (tmp_path / "spk1" / "u1.txt").write_text("Hello there\n")
    (tmp_path / "u2.flac").write_bytes(b"")
    (tmp_path / "u2.tokens").write_text("7 8")
    records = {r.id: r for r in iter_manifest(tmp_path, SkipReport())}
    assert set(records) == {"spk1__u1", "u2"}
    assert records["spk1__u1"].text == "Hello there"
    assert records["u2"].tokens == (7, 8)
    assert records["u2"].text is None


def test_folder_with_record_files_reads_those_instead_of_scanning(tmp_path):
    (tmp_path / "x.wav").write_bytes(make_wav())
    (tmp_path / "a.jsonl").write_text('{"id": "only", "audio_path": "x.wav", "text": "t"}\n')
    assert [r.id for r in iter_manifest(tmp_path, SkipReport())] == ["only"]


@pytest.mark.parametrize(
    ("value", "expected"), [("1 2 3", (1, 2, 3)), ("1,2, 3", (1, 2, 3)), ([4, 5], (4, 5))]
)
def test_tokens_parse_from_lists_and_strings(value, expected):
    assert parse_tokens(value) == expected


@pytest.mark.parametrize("value", ["1 two", [-1], 3.5])
def test_bad_tokens_are_rejected(value):
    with pytest.raises(ValueError):
        parse_tokens(value)
