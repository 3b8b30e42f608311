import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asr_pipeline.io.manifests import iter_manifest, iter_text_lines, parse_tokens
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


# --- JSON features ---------------------------------------------------------------------------------------


def write_jsonl(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_jsonl_feature_fields_resolve_and_inline_shapes_are_recorded(tmp_path):
    manifest = write_jsonl(
        tmp_path / "m.jsonl",
        {"id": "p", "features_path": "feats/p.npy", "rows": 7, "cols": "80", "tokens": [1]},
        {"id": "grid", "features": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], "text": "hi"},  # (2, 3)
        {"id": "flat", "features": [1, 2, 3, 4, 5, 6], "rows": 3, "cols": 2, "text": "hi"},  # 3 * 2 = 6
    )
    records = {r.id: r for r in iter_manifest(manifest, SkipReport())}
    assert records["p"].features_path == str(tmp_path / "feats" / "p.npy")
    assert (records["p"].rows, records["p"].cols, records["p"].has_inline_features) == (7, 80, False)
    assert (records["grid"].rows, records["grid"].cols, records["grid"].has_inline_features) == (2, 3, True)
    assert (records["flat"].rows, records["flat"].cols, records["flat"].has_inline_features) == (3, 2, True)


def test_existing_records_keep_their_defaults(tmp_path):
    manifest = write_jsonl(tmp_path / "m.jsonl", {"id": "a", "audio_path": "a.wav", "text": "t"})
    [record] = iter_manifest(manifest, SkipReport())
    assert (record.audio_bytes, record.features_path, record.rows, record.cols) == (None, None, None, None)
    assert record.has_inline_features is False


BAD_JSON_FEATURES = [
    ({"features": [1, 2, 3, 4, 5], "rows": 2, "cols": 3}, "rows*cols does not match"),  # 2 * 3 != 5
    ({"features": [[1, 2], [3, 4]], "rows": 3}, "rows*cols does not match"),  # 2-D is (2, 2)
    ({"features": [1, 2, 3, 4]}, "invalid features"),  # flat without rows/cols
    ({"features": [[1, 2], [3]]}, "ragged features"),
    ({"features": [[1, "x"]]}, "non-numeric features"),
    ({"features": [[1.0, float("nan")]]}, "NaN/Inf features"),  # json.dumps writes NaN, json.loads reads it
    ({"features": [1.0, float("inf")], "rows": 1, "cols": 2}, "NaN/Inf features"),
    ({"features": []}, "invalid features"),
    ({"features_path": "f.npy", "rows": "many", "cols": 80}, "invalid rows/cols"),
    ({"features_path": "f.npy", "rows": 0, "cols": 80}, "invalid rows/cols"),
    ({"features_path": 3}, "invalid features_path"),
    ({"tokens": [1.5, 2]}, "invalid tokens"),
]


@pytest.mark.parametrize(("fields", "reason"), BAD_JSON_FEATURES)
def test_bad_json_features_are_counted_with_their_line(tmp_path, fields, reason):
    manifest = write_jsonl(
        tmp_path / "m.jsonl", {"id": "ok", "text": "t"}, {"id": "bad", "text": "t", **fields}
    )
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["ok"]
    assert report.to_dict()["skipped_by_reason"] == {reason: 1}
    assert report.to_dict()["first_skipped"][reason][0].startswith(f"{manifest}:2: {reason}")


@pytest.mark.parametrize(("fields", "reason"), BAD_JSON_FEATURES)
def test_bad_json_features_stop_strict_mode_naming_file_and_line(tmp_path, fields, reason):
    manifest = write_jsonl(tmp_path / "m.jsonl", {"id": "ok", "text": "t"}, {"id": "bad", **fields})
    with pytest.raises(InputError, match=rf"m\.jsonl:2: {re.escape(reason)}"):
        list(iter_manifest(manifest, SkipReport(strict=True)))


def test_invalid_utf8_line_in_jsonl_is_counted_and_the_rest_is_read(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b'{"id": "a", "text": "\xff"}\n{"id": "b", "text": "t"}\n')
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["b"]
    assert report.to_dict()["first_skipped"]["invalid UTF-8"][0].startswith(f"{manifest}:1")


def test_json_array_records_are_located_by_index(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps([{"id": "a", "text": "t"}, {"id": "b", "tokens": "x"}]))
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["a"]
    assert report.to_dict()["first_skipped"]["invalid tokens"][0].startswith(f"{manifest}:record 2")


# --- transcripts and ids ---------------------------------------------------------------------------------


NON_STRING_TEXT = [
    {"text": 42},
    {"sentence": 3.5},
    {"transcript": ["hello", "world"]},
    {"text": {"en": "hello"}},
    {"text": True},
]


@pytest.mark.parametrize("fields", NON_STRING_TEXT)
def test_non_string_text_is_counted_naming_file_and_line(tmp_path, fields):
    manifest = write_jsonl(tmp_path / "m.jsonl", {"id": "ok", "text": "t"}, {"id": "bad", **fields})
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["ok"]
    assert report.to_dict()["skipped_by_reason"] == {"invalid text": 1}
    [message] = report.to_dict()["first_skipped"]["invalid text"]
    field = next(iter(fields))
    assert message.startswith(f"{manifest}:2: invalid text ({field} must be a string, got ")


@pytest.mark.parametrize("fields", NON_STRING_TEXT)
def test_non_string_text_stops_strict_mode_naming_file_and_line(tmp_path, fields):
    manifest = write_jsonl(tmp_path / "m.jsonl", {"id": "bad", **fields})
    with pytest.raises(InputError, match=r"m\.jsonl:1: invalid text"):
        list(iter_manifest(manifest, SkipReport(strict=True)))


def test_non_string_text_in_a_json_array_is_located_by_record(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps([{"id": "a", "text": "t"}, {"id": "b", "text": 7}]))
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["a"]
    assert report.to_dict()["first_skipped"]["invalid text"][0].startswith(
        f"{manifest}:record 2: invalid text"
    )


def test_a_non_string_audio_path_is_counted_not_a_crash(tmp_path):
    manifest = write_jsonl(tmp_path / "m.jsonl", {"id": "a", "audio_path": 12, "text": "t"})
    report = SkipReport()
    assert list(iter_manifest(manifest, report)) == []
    assert report.to_dict()["skipped_by_reason"] == {"invalid audio_path": 1}


@pytest.mark.parametrize("field", ["audio_path", "features_path"])
def test_an_empty_path_is_counted_as_empty_not_read_as_the_manifest_folder(tmp_path, field):
    manifest = write_jsonl(tmp_path / "m.jsonl", {"id": "a", field: "", "text": "t"})
    report = SkipReport()
    assert list(iter_manifest(manifest, report)) == []
    assert report.to_dict()["first_skipped"] == {
        "empty path": [f'{manifest}:1: empty path ({field} is "": name a file, or leave the field out)']
    }


def test_records_without_ids_whose_audio_shares_a_stem_get_distinct_ids(tmp_path):
    manifest = write_jsonl(
        tmp_path / "m.jsonl",
        {"audio_path": "stereo.opus", "text": "a"},
        {"audio_path": "stereo.sph", "text": "b"},
        {"audio_path": "mono.wav", "text": "c"},
        {"audio_path": "./stereo.opus", "text": "a again"},  # the same file: a real duplicate
    )
    assert [r.id for r in iter_manifest(manifest, SkipReport())] == ["stereo", "stereo.sph", "mono", "stereo"]


# --- relative paths --------------------------------------------------------------------------------------


def _jsonl(folder):
    return write_jsonl(folder / "m.jsonl", {"id": "u", "audio_path": "audio/u.wav", "text": "t"})


def _json_array(folder):
    (folder / "m.json").write_text(json.dumps([{"id": "u", "audio_path": "audio/u.wav", "text": "t"}]))
    return folder / "m.json"


def _audio_tsv(folder):
    (folder / "m.tsv").write_text("audio/u.wav\tt\n")
    return folder / "m.tsv"


def _parquet(folder):
    pq.write_table(
        pa.table({"id": ["u"], "audio_path": ["audio/u.wav"], "text": ["t"]}), folder / "m.parquet"
    )
    return folder / "m.parquet"


def _kaldi(folder):
    (folder / "wav.scp").write_text("u audio/u.wav\n")
    (folder / "text").write_text("u t\n")
    return folder


@pytest.mark.parametrize("write", [_jsonl, _json_array, _audio_tsv, _parquet, _kaldi])
def test_relative_audio_paths_resolve_against_the_manifests_folder_in_every_form(
    tmp_path, write, monkeypatch
):
    folder = tmp_path / "corpus"
    folder.mkdir()
    manifest = write(folder)
    monkeypatch.chdir(tmp_path)  # not the manifest's folder: a path relative to the cwd would be wrong
    [record] = iter_manifest(manifest.relative_to(tmp_path), SkipReport())
    assert record.audio_path == "corpus/audio/u.wav"


def test_relative_feature_paths_resolve_against_the_tsvs_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.tsv").write_text("feats/a.npy\t10\t80\t1\n")
    [record] = iter_manifest(tmp_path / "sub" / "m.tsv", SkipReport())
    assert record.features_path == str(tmp_path / "sub" / "feats" / "a.npy")


# --- plain text ------------------------------------------------------------------------------------------


def test_text_lines_skip_blank_lines_and_tolerate_bom_and_crlf(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"\xef\xbb\xbfhello world\r\n\r\n  second line \r\nthird")
    report = SkipReport()
    assert [line for _, line in iter_text_lines(corpus, report)] == ["hello world", "second line", "third"]
    assert (report.seen, report.skipped) == (3, 0)


def test_text_line_with_invalid_utf8_is_counted_naming_file_and_line(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"good\nbad \xff\xfe\nalso good\n")
    report = SkipReport()
    assert [loc.rsplit(":", 1)[1] for loc, _ in iter_text_lines(corpus, SkipReport())] == ["1", "3"]
    assert [line for _, line in iter_text_lines(corpus, report)] == ["good", "also good"]
    assert report.to_dict()["first_skipped"]["invalid UTF-8"][0].startswith(f"{corpus}:2")
    with pytest.raises(InputError, match=r"corpus\.txt:2: invalid UTF-8"):
        list(iter_text_lines(corpus, SkipReport(strict=True)))


def test_a_txt_manifest_says_it_is_tokenizer_text(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello\n")
    with pytest.raises(ValueError, match="iter_text_lines"):
        list(iter_manifest(corpus, SkipReport()))


# --- folders ---------------------------------------------------------------------------------------------


def test_folder_reads_every_record_file_kind_and_ignores_audio(tmp_path):
    (tmp_path / "x.wav").write_bytes(make_wav())
    write_jsonl(tmp_path / "a.jsonl", {"id": "j", "text": "t"})
    (tmp_path / "b.tsv").write_text("t.npy\t10\t80\t1\n")
    pq.write_table(pa.table({"id": ["p"], "text": ["t"]}), tmp_path / "c.parquet")
    (tmp_path / "d.json").write_text(json.dumps([{"id": "arr", "text": "t"}]))
    assert [r.id for r in iter_manifest(tmp_path, SkipReport())] == ["j", "t", "p", "arr"]
