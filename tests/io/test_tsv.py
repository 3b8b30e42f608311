"""TSV manifests through iter_manifest (io/tsv.py): feature lists, audio lists, Common Voice tables."""

import pytest

from asr_pipeline.io.manifests import iter_manifest
from asr_pipeline.io.report import InputError, SkipReport


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


# --- audio lists and tables ------------------------------------------------------------------------------


def test_headerless_audio_tsv_is_audio_path_then_text(tmp_path):
    manifest = tmp_path / "train.tsv"
    manifest.write_text("audio/a.wav\tHello world\nb.flac\tsecond one\n")
    records = list(iter_manifest(manifest, SkipReport()))
    assert [(r.id, r.text, r.kind) for r in records] == [
        ("a", "Hello world", "audio_file"),
        ("b", "second one", "audio_file"),
    ]
    assert records[0].audio_path == str(tmp_path / "audio" / "a.wav")
    assert records[1].location == f"{manifest}:2"


def test_audio_tsv_with_a_header_is_read_by_column_name(tmp_path):
    manifest = tmp_path / "m.tsv"
    manifest.write_text("id\ttext\taudio_path\tspeaker\nu1\thi there\tx/1.wav\tanna\n")
    [record] = iter_manifest(manifest, SkipReport())
    assert (record.id, record.text, record.audio_path) == ("u1", "hi there", str(tmp_path / "x" / "1.wav"))


def test_audio_tsv_header_may_give_tokens_instead_of_text(tmp_path):
    manifest = tmp_path / "m.tsv"
    manifest.write_text("path\ttokens\na.wav\t3 4 5\n")
    [record] = iter_manifest(manifest, SkipReport())
    assert (record.tokens, record.text) == ((3, 4, 5), None)


COMMON_VOICE_HEADER = "client_id\tpath\tsentence_id\tsentence\tsentence_domain\tup_votes\tdown_votes\tage\n"


def test_common_voice_tsv_takes_path_and_sentence_and_finds_the_audio_in_clips(tmp_path):
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "common_voice_en_1.mp3").write_bytes(b"ID3")
    manifest = tmp_path / "train.tsv"
    manifest.write_text(
        COMMON_VOICE_HEADER + 'c0ffee\tcommon_voice_en_1.mp3\ts1\tThe "quoted" word.\t\t2\t0\tthirties\n'
    )
    [record] = iter_manifest(manifest, SkipReport())
    assert record.id == "common_voice_en_1"
    assert record.text == 'The "quoted" word.'  # Common Voice does not quote fields: quotes are text
    assert record.audio_path == str(tmp_path / "clips" / "common_voice_en_1.mp3")


def test_an_audio_file_next_to_the_tsv_wins_over_clips(tmp_path):
    (tmp_path / "clips").mkdir()
    for folder in (tmp_path, tmp_path / "clips"):
        (folder / "a.mp3").write_bytes(b"ID3")
    manifest = tmp_path / "train.tsv"
    manifest.write_text("path\tsentence\na.mp3\thi\n")
    [record] = iter_manifest(manifest, SkipReport())
    assert record.audio_path == str(tmp_path / "a.mp3")


def test_an_audio_file_found_nowhere_keeps_the_path_next_to_the_tsv_for_the_decoder_to_report(tmp_path):
    manifest = tmp_path / "train.tsv"
    manifest.write_text("path\tsentence\ngone.mp3\thi\n")
    [record] = iter_manifest(manifest, SkipReport())
    assert record.audio_path == str(tmp_path / "gone.mp3")


def test_an_audio_header_without_a_transcript_column_is_rejected_naming_file_and_line(tmp_path):
    manifest = tmp_path / "m.tsv"
    manifest.write_text("path\tspeaker\na.wav\tanna\n")
    with pytest.raises(
        InputError, match=r"m\.tsv:1: the header names the audio column 'path' but no transcript"
    ):
        list(iter_manifest(manifest, SkipReport()))


BAD_AUDIO_TSV_ROWS = [
    ("a.wav\thello\textra\n", "wrong column count"),
    ("a.wav\n", "wrong column count"),
    ("\thello\n", "missing audio path"),
    (b"a.wav\t\xff\n", "invalid UTF-8"),
]


@pytest.mark.parametrize(("line", "reason"), BAD_AUDIO_TSV_ROWS)
def test_bad_audio_tsv_rows_are_counted_with_their_line(tmp_path, line, reason):
    manifest = tmp_path / "m.tsv"
    manifest.write_bytes(b"ok.wav\tfine\n" + (line if isinstance(line, bytes) else line.encode()))
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["ok"]
    assert report.to_dict()["skipped_by_reason"] == {reason: 1}
    assert report.to_dict()["first_skipped"][reason][0].startswith(f"{manifest}:2: {reason}")
    with pytest.raises(InputError, match=rf"m\.tsv:2: {reason}"):
        list(iter_manifest(manifest, SkipReport(strict=True)))


def test_a_short_common_voice_row_is_counted_naming_the_expected_columns(tmp_path):
    manifest = tmp_path / "train.tsv"
    manifest.write_text(COMMON_VOICE_HEADER + "c0ffee\ta.mp3\ts1\n")
    report = SkipReport()
    assert list(iter_manifest(manifest, report)) == []
    [message] = report.to_dict()["first_skipped"]["wrong column count"]
    assert message.startswith(f"{manifest}:2: wrong column count (expected client_id<TAB>path<TAB>")


def test_a_features_row_after_an_audio_first_row_is_counted_not_misread(tmp_path):
    manifest = tmp_path / "m.tsv"
    manifest.write_text("a.wav\thello\nf.npy\t10\t80\t1 2\n")
    report = SkipReport()
    assert [r.id for r in iter_manifest(manifest, report)] == ["a"]
    assert report.to_dict()["skipped_by_reason"] == {"wrong column count": 1}


def test_a_headerless_features_tsv_says_how_an_audio_list_would_be_recognized(tmp_path):
    manifest = tmp_path / "m.tsv"
    manifest.write_text("a.wv\thello\n")  # WavPack: not a supported audio extension
    report = SkipReport()
    assert list(iter_manifest(manifest, report)) == []
    [message] = report.to_dict()["first_skipped"]["wrong column count"]
    assert "features_path<TAB>rows<TAB>cols<TAB>tokens" in message
    assert "audio_path<TAB>text, needs a first column ending in .wav/.flac" in message


def test_audio_rows_without_ids_whose_files_share_a_stem_get_distinct_ids(tmp_path):
    manifest = tmp_path / "m.tsv"
    manifest.write_text("stereo.opus\tone\nstereo.sph\ttwo\n")
    assert [r.id for r in iter_manifest(manifest, SkipReport())] == ["stereo", "stereo.sph"]


def test_feature_rows_whose_files_share_a_stem_get_distinct_ids(tmp_path):
    manifest = tmp_path / "m.tsv"
    manifest.write_text("f/a.npy\t10\t80\t1\nf/a.txt\t10\t80\t2\n")
    assert [r.id for r in iter_manifest(manifest, SkipReport())] == ["f__a", "f__a.txt"]
