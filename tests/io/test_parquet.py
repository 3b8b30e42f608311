"""Parquet record tables through iter_manifest (io/parquet.py)."""

import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asr_pipeline.io.manifests import iter_manifest
from asr_pipeline.io.report import InputError, SkipReport


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


def test_rows_without_ids_whose_audio_shares_a_stem_get_distinct_ids(tmp_path):
    manifest = write_parquet(
        tmp_path / "m.parquet", {"path": ["clips/a.mp3", "clips/a.wav", "b.wav"], "text": ["x", "y", "z"]}
    )
    assert [r.id for r in iter_manifest(manifest, SkipReport())] == ["a", "a.wav", "b"]


def test_a_datasets_save_to_disk_folder_is_read_as_its_arrow_shards_in_order(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = {
        "id": [f"u{i}" for i in range(5)],
        "text": ["one", "two", "three", "four", None],
        "audio": [{"bytes": f"RIFF{i}".encode(), "path": f"orig{i}.wav"} for i in range(5)],
    }
    saved = tmp_path / "saved"
    dataset = datasets.Dataset.from_dict(rows).cast_column("audio", datasets.Audio(decode=False))
    dataset.save_to_disk(str(saved), num_shards=3)
    assert len(list(saved.glob("data-*.arrow"))) == 3
    records = list(iter_manifest(saved, SkipReport()))
    assert [r.id for r in records] == rows["id"]
    assert [r.audio_bytes for r in records] == [f"RIFF{i}".encode() for i in range(5)]
    assert [r.text for r in records] == rows["text"]
    assert records[0].location == f"{saved / 'data-00000-of-00003.arrow'}:row 0"


def test_an_arrow_file_in_file_format_reads_like_a_stream(tmp_path):
    table = pa.table({"id": ["a", "b"], "text": ["x", "y"], "audio_path": ["a.wav", "b.wav"]})
    with pa.ipc.new_file(tmp_path / "t.arrow", table.schema) as writer:
        writer.write_table(table)
    records = list(iter_manifest(tmp_path / "t.arrow", SkipReport()))
    assert [(r.id, r.text, r.audio_path) for r in records] == [
        ("a", "x", str(tmp_path / "a.wav")),
        ("b", "y", str(tmp_path / "b.wav")),
    ]


def test_an_unreadable_arrow_file_is_rejected_naming_it(tmp_path):
    (tmp_path / "bad.arrow").write_bytes(b"not arrow")
    with pytest.raises(
        InputError, match=re.escape(f"{tmp_path / 'bad.arrow'}: not a readable Arrow IPC file")
    ):
        list(iter_manifest(tmp_path / "bad.arrow", SkipReport()))
