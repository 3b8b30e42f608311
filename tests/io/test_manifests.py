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


# --- TSV -------------------------------------------------------------------------------------------------


def test_tsv_rows_carry_feature_paths_shapes_tokens_and_optional_text(tmp_path):
    manifest = tmp_path / "train.tsv"
    manifest.write_text(
        "features_path\trows\tcols\ttokens\ttext\n"  # optional header
        "feats/a.npy\t120\t80\t5 6 7\thello world\n"
        "\n"
        "feats/b.npy\t98\t80\t1,2\n"
    )
    report = SkipReport()
    records = list(iter_manifest(manifest, report))
    assert [r.id for r in records] == ["feats__a", "feats__b"]
    assert records[0].features_path == str(tmp_path / "feats" / "a.npy")
    assert (records[0].rows, records[0].cols, records[0].tokens, records[0].text) == (
        120,
        80,
        (5, 6, 7),
        "hello world",
    )
    assert (records[1].text, records[1].tokens, records[1].location) == (None, (1, 2), f"{manifest}:4")
    assert report.seen == 2


BAD_TSV_ROWS = [
    ("a.npy\t120\t80\n", "wrong column count"),
    ("a.npy\t120\t80\t1\ttext\textra\n", "wrong column count"),
    ("a.npy\t12.5\t80\t1\n", "invalid rows/cols"),
    ("a.npy\t120\tx\t1\n", "invalid rows/cols"),
    ("a.npy\t-3\t80\t1\n", "invalid rows/cols"),
    ("a.npy\t120\t80\t1 b\n", "invalid tokens"),
    ("\t120\t80\t1\n", "missing features_path"),
    (b"a.npy\t120\t80\t1\t\xff\n", "invalid UTF-8"),
]


@pytest.mark.parametrize(("line", "reason"), BAD_TSV_ROWS)
def test_bad_tsv_rows_are_counted_with_their_line(tmp_path, line, reason):
    manifest = tmp_path / "m.tsv"
    manifest.write_bytes(b"ok.npy\t10\t80\t1 2\n" + (line if isinstance(line, bytes) else line.encode()))
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["ok"]
    assert report.to_dict()["skipped_by_reason"] == {reason: 1}
    assert report.to_dict()["first_skipped"][reason][0].startswith(f"{manifest}:2: {reason}")


@pytest.mark.parametrize(("line", "reason"), BAD_TSV_ROWS)
def test_bad_tsv_rows_stop_strict_mode_naming_file_and_line(tmp_path, line, reason):
    manifest = tmp_path / "m.tsv"
    manifest.write_bytes(b"ok.npy\t10\t80\t1 2\n" + (line if isinstance(line, bytes) else line.encode()))
    with pytest.raises(InputError, match=rf"m\.tsv:2: {reason}"):
        list(iter_manifest(manifest, SkipReport(strict=True)))


# --- Parquet ---------------------------------------------------------------------------------------------


def write_parquet(path, columns: dict, schema=None):
    pq.write_table(pa.table(columns, schema=schema), path, row_group_size=2)  # several row groups
    return path


def test_parquet_aliases_and_hugging_face_audio_struct(tmp_path):
    manifest = write_parquet(
        tmp_path / "hf.parquet",
        {
            "utt_id": ["u0", "u1", "u2"],
            "sentence": ["one", "two", None],
            "label_ids": [[1, 2], None, [3]],
            "audio": [
                {"bytes": b"RIFF0", "path": "orig0.wav"},
                {"bytes": None, "path": "clips/u1.wav"},  # no bytes: the path is the fallback
                None,
            ],
        },
    )
    records = list(iter_manifest(manifest, SkipReport()))
    assert [r.id for r in records] == ["u0", "u1", "u2"]
    assert (records[0].audio_bytes, records[0].audio_path, records[0].tokens) == (b"RIFF0", None, (1, 2))
    assert (records[1].audio_bytes, records[1].audio_path) == (None, str(tmp_path / "clips" / "u1.wav"))
    assert (records[2].text, records[2].tokens, records[2].audio_bytes) == (None, (3,), None)
    assert [r.location for r in records] == [f"{manifest}:row {n}" for n in range(3)]


def test_parquet_reads_only_the_alias_columns(tmp_path, monkeypatch):
    manifest = write_parquet(
        tmp_path / "m.parquet",
        {"key": ["a"], "transcript": ["t"], "file_path": ["a.flac"], "huge_unrelated": [[0.0] * 1000]},
    )
    asked = []
    original = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        asked.append(sorted(kwargs["columns"]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    [record] = iter_manifest(manifest, SkipReport())
    assert asked == [["file_path", "key", "transcript"]]
    assert (record.id, record.text, record.audio_path) == ("a", "t", str(tmp_path / "a.flac"))


def test_parquet_inline_features_flat_and_2d(tmp_path):
    write_parquet(
        tmp_path / "flat.parquet",
        {"id": ["a"], "fbank": [[0.0] * 6], "num_frames": [3], "feature_dim": [2], "targets": [[4]]},
    )
    write_parquet(
        tmp_path / "grid.parquet", {"id": ["b"], "input_features": [[[0.0, 1.0]] * 5], "text": ["t"]}
    )
    write_parquet(tmp_path / "bytes.parquet", {"id": ["c"], "audio_bytes": [b"\x00\x01"], "text": ["t"]})
    records = {r.id: r for r in iter_manifest(tmp_path, SkipReport())}  # a folder of Parquet files
    assert (records["a"].rows, records["a"].cols, records["a"].has_inline_features) == (3, 2, True)
    assert (records["b"].rows, records["b"].cols, records["b"].has_inline_features) == (5, 2, True)
    assert records["c"].audio_bytes == b"\x00\x01"


BAD_PARQUET_ROWS = [  # (a good row, a bad row of the same columns, reason)
    (
        {"features": [0.0] * 6, "rows": 2, "cols": 3},
        {"features": [0.0] * 5, "rows": 2, "cols": 3},
        "rows*cols does not match",
    ),
    (
        {"features": [0.0] * 6, "rows": 2, "cols": 3},
        {"features": [0.0] * 4, "rows": None, "cols": None},
        "invalid features",
    ),
    ({"features": [[0.0, 1.0]]}, {"features": [[0.0, 1.0], [2.0]]}, "ragged features"),
    (
        {"features": [[0.0, 1.0]] * 2, "rows": 2},
        {"features": [[0.0, 1.0]] * 2, "rows": 3},
        "rows*cols does not match",
    ),
    ({"tokens": ["1"]}, {"tokens": ["1", "x"]}, "invalid tokens"),
    ({"rows": 10, "cols": 80}, {"rows": 0, "cols": 80}, "invalid rows/cols"),
    ({"audio_data": b"x"}, {"audio_data": b""}, "empty audio bytes"),
]


@pytest.mark.parametrize(("good", "bad", "reason"), BAD_PARQUET_ROWS)
def test_bad_parquet_rows_are_counted_with_their_row(tmp_path, good, bad, reason):
    manifest = tmp_path / "m.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "ok", **good}, {"id": "bad", **bad}]), manifest)
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["ok"]
    assert report.to_dict()["skipped_by_reason"] == {reason: 1}
    assert report.to_dict()["first_skipped"][reason][0].startswith(f"{manifest}:row 1: {reason}")
    with pytest.raises(InputError, match=rf"m\.parquet:row 1: {re.escape(reason)}"):
        list(iter_manifest(manifest, SkipReport(strict=True)))


def test_unreadable_parquet_is_rejected_naming_the_file(tmp_path):
    manifest = tmp_path / "broken.parquet"
    manifest.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match=r"broken\.parquet: not a readable Parquet file"):
        list(iter_manifest(manifest, SkipReport()))


def test_parquet_features_of_the_wrong_type_are_rejected_naming_the_column(tmp_path):
    manifest = write_parquet(tmp_path / "m.parquet", {"id": ["a"], "fbank": ["not a list"]})
    with pytest.raises(InputError, match=r"m\.parquet: column 'fbank'"):
        list(iter_manifest(manifest, SkipReport()))


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


def test_audio_folder_reads_frame_count_hints(tmp_path):
    (tmp_path / "a.wav").write_bytes(make_wav())
    (tmp_path / "a.rows").write_text("412\n")
    (tmp_path / "b.wav").write_bytes(make_wav())
    (tmp_path / "b.frames").write_text("98")
    (tmp_path / "c.wav").write_bytes(make_wav())
    records = {r.id: r for r in iter_manifest(tmp_path, SkipReport())}
    assert (records["a"].rows, records["b"].rows, records["c"].rows) == (412, 98, None)


def test_bad_frame_count_hint_is_counted_naming_the_sidecar(tmp_path):
    (tmp_path / "a.wav").write_bytes(make_wav())
    (tmp_path / "a.rows").write_text("about 400")
    report = SkipReport()
    assert list(iter_manifest(tmp_path, report)) == []
    assert report.to_dict()["first_skipped"]["invalid frame count"][0].startswith(str(tmp_path / "a.rows"))
    with pytest.raises(InputError, match=r"a\.rows: invalid frame count"):
        list(iter_manifest(tmp_path, SkipReport(strict=True)))


def test_folder_reads_every_record_file_kind_and_ignores_audio(tmp_path):
    (tmp_path / "x.wav").write_bytes(make_wav())
    write_jsonl(tmp_path / "a.jsonl", {"id": "j", "text": "t"})
    (tmp_path / "b.tsv").write_text("t.npy\t10\t80\t1\n")
    write_parquet(tmp_path / "c.parquet", {"id": ["p"], "text": ["t"]})
    (tmp_path / "d.json").write_text(json.dumps([{"id": "arr", "text": "t"}]))
    assert [r.id for r in iter_manifest(tmp_path, SkipReport())] == ["j", "t", "p", "arr"]
