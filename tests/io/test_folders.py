"""Audio folders and LibriSpeech trees through iter_manifest (io/folders.py)."""

import os

import pytest

from asr_pipeline.io.audio import load_audio
from asr_pipeline.io.manifests import iter_manifest
from asr_pipeline.io.report import InputError, SkipReport
from tests.conftest import make_wav
from tests.io.audio_files import write_audio


def make_librispeech(split, transcripts: dict[str, str]):
    """LibriSpeech's layout: ``<split>/<speaker>/<chapter>/<utt-id>.flac`` and one ``.trans.txt`` per chapter."""
    chapters: dict[str, list[str]] = {}
    for utt_id, text in transcripts.items():
        speaker, chapter, _ = utt_id.split("-")
        write_audio(split / speaker / chapter / f"{utt_id}.flac")
        chapters.setdefault(f"{speaker}-{chapter}", []).append(f"{utt_id} {text}\n")
    for key, lines in chapters.items():
        speaker, chapter = key.split("-")
        (split / speaker / chapter / f"{key}.trans.txt").write_text("".join(lines))
    return split


LIBRI = {
    "19-198-0000": "NORTHANGER ABBEY",
    "19-198-0001": "THIS LITTLE WORK WAS FINISHED",
    "19-227-0000": "PERSUASION",
    "103-1240-0000": "CHAPTER ONE MISSUS RACHEL LYNDE IS SURPRISED",
}


# --- LibriSpeech -----------------------------------------------------------------------------------------


def test_librispeech_split_folder_gives_one_record_per_utterance_with_its_transcript(tmp_path):
    split = make_librispeech(tmp_path / "train-clean-100", LIBRI)
    report = SkipReport()
    records = {r.id: r for r in iter_manifest(split, report)}
    assert {utt_id: r.text for utt_id, r in records.items()} == LIBRI
    assert records["19-198-0001"].audio_path == str(split / "19" / "198" / "19-198-0001.flac")
    assert records["19-198-0001"].location == f"{split / '19' / '198' / '19-198.trans.txt'}:2"
    assert (report.seen, report.skipped) == (4, 0)


def test_librispeech_is_found_from_the_corpus_root_and_its_documentation_files_are_ignored(tmp_path):
    make_librispeech(tmp_path / "LibriSpeech" / "dev-clean", {"19-198-0000": "A"})
    (tmp_path / "LibriSpeech" / "SPEAKERS.TXT").write_text("; who is who\n")
    report = SkipReport()
    assert [r.id for r in iter_manifest(tmp_path / "LibriSpeech", report)] == ["19-198-0000"]
    assert report.skipped == 0


def test_a_librispeech_line_without_its_audio_is_counted_naming_the_transcript_line(tmp_path):
    split = make_librispeech(tmp_path / "dev-clean", LIBRI)
    (split / "19" / "198" / "19-198-0001.flac").unlink()
    report = SkipReport()
    assert "19-198-0001" not in {r.id for r in iter_manifest(split, report)}
    [message] = report.to_dict()["first_skipped"]["missing audio"]
    assert message.startswith(f"{split / '19' / '198' / '19-198.trans.txt'}:2: missing audio")
    with pytest.raises(InputError, match=r"19-198\.trans\.txt:2: missing audio"):
        list(iter_manifest(split, SkipReport(strict=True)))


def test_a_librispeech_audio_file_no_line_names_is_counted(tmp_path):
    split = make_librispeech(tmp_path / "dev-clean", LIBRI)
    write_audio(split / "19" / "198" / "19-198-0099.flac")
    report = SkipReport()
    assert len(list(iter_manifest(split, report))) == 4
    assert report.to_dict()["first_skipped"]["no transcript"] == [
        f"{split / '19' / '198' / '19-198-0099.flac'}: no transcript (no *.trans.txt line in its folder names it)"
    ]
    assert report.seen == 5


# --- audio folders ---------------------------------------------------------------------------------------


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


def test_an_unsupported_file_in_an_audio_folder_is_counted_naming_it(tmp_path):
    write_audio(tmp_path / "a.wav")
    (tmp_path / "notes.docx").write_bytes(b"PK")
    (tmp_path / "b.wv").write_bytes(b"wvpk")  # WavPack: not supported
    report = SkipReport()
    assert [r.id for r in iter_manifest(tmp_path, report)] == ["a"]
    assert report.to_dict()["skipped_by_reason"] == {"unsupported extension": 2}
    assert report.to_dict()["first_skipped"]["unsupported extension"][0].startswith(
        f"{tmp_path / 'b.wv'}: unsupported extension (not audio (.wav, .flac"
    )
    with pytest.raises(InputError, match=r"b\.wv: unsupported extension"):
        list(iter_manifest(tmp_path, SkipReport(strict=True)))


def test_hidden_files_and_sidecars_are_not_counted_as_unsupported(tmp_path):
    write_audio(tmp_path / "a.wav")
    for name in ("a.txt", "a.tokens", "a.rows", ".DS_Store"):
        (tmp_path / name).write_text("1")
    report = SkipReport()
    assert len(list(iter_manifest(tmp_path, report))) == 1
    assert report.skipped == 0


def test_sph_files_are_audio(tmp_path):
    write_audio(tmp_path / "en_4156.sph", seconds=0.25)
    (tmp_path / "en_4156.txt").write_text("hello")
    [record] = iter_manifest(tmp_path, SkipReport())
    assert (record.id, record.text) == ("en_4156", "hello")
    assert load_audio(record.audio_path, 16000).shape == (4000,)  # 0.25 s at 16 kHz: libsndfile reads NIST


def test_files_sharing_a_stem_get_distinct_ids_and_unique_stems_keep_theirs(tmp_path):
    write_audio(tmp_path / "stereo.flac")  # libsndfile cannot write Opus; the reader only looks at names
    (tmp_path / "stereo.opus").write_bytes(b"OggS")
    write_audio(tmp_path / "stereo.sph")
    write_audio(tmp_path / "mono.wav")
    report = SkipReport()
    ids = [r.id for r in iter_manifest(tmp_path, report)]
    assert ids == ["mono", "stereo", "stereo.opus", "stereo.sph"]
    assert report.skipped == 0


def test_symlinked_subfolders_are_followed(tmp_path):
    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere" / "speaker2"
    write_audio(corpus / "speaker1" / "a.wav")
    write_audio(elsewhere / "b.wav")
    os.symlink(elsewhere, corpus / "speaker2")
    records = list(iter_manifest(corpus, SkipReport()))
    assert [r.id for r in records] == ["speaker1__a", "speaker2__b"]
    assert records[1].audio_path == str(corpus / "speaker2" / "b.wav")


def test_a_symlink_to_an_ancestor_is_counted_as_a_loop_and_not_entered(tmp_path):
    write_audio(tmp_path / "sub" / "a.wav")
    os.symlink(tmp_path, tmp_path / "sub" / "back")
    report = SkipReport()
    assert [r.id for r in iter_manifest(tmp_path, report)] == ["sub__a"]
    assert report.to_dict()["first_skipped"]["symlink loop"][0].startswith(
        f"{tmp_path / 'sub' / 'back'}: symlink loop"
    )
    with pytest.raises(InputError, match=r"back: symlink loop"):
        list(iter_manifest(tmp_path, SkipReport(strict=True)))


def test_a_folder_linked_twice_is_read_once_and_the_second_link_counted(tmp_path):
    write_audio(tmp_path / "real" / "a.wav")
    os.symlink(tmp_path / "real", tmp_path / "z_alias")
    report = SkipReport()
    assert [r.id for r in iter_manifest(tmp_path, report)] == ["real__a"]
    assert report.to_dict()["skipped_by_reason"] == {"folder linked twice": 1}


def test_a_broken_symlink_is_counted(tmp_path):
    write_audio(tmp_path / "a.wav")
    os.symlink(tmp_path / "gone.wav", tmp_path / "b.wav")
    report = SkipReport()
    assert [r.id for r in iter_manifest(tmp_path, report)] == ["a"]
    assert report.to_dict()["first_skipped"]["broken symlink"][0].startswith(f"{tmp_path / 'b.wav'}: broken")


def test_a_fifo_in_an_audio_folder_is_counted_and_never_opened(tmp_path):
    write_audio(tmp_path / "a.wav")
    os.mkfifo(tmp_path / "b.wav")  # opening it for reading would block until a writer comes
    os.symlink(tmp_path / "b.wav", tmp_path / "c.wav")  # a link to it: not "broken", the same skip
    report = SkipReport()
    assert [r.id for r in iter_manifest(tmp_path, report)] == ["a"]
    summary = report.to_dict()
    assert summary["skipped_by_reason"] == {"not a regular file": 2}
    assert summary["first_skipped"]["not a regular file"][0] == (
        f"{tmp_path / 'b.wav'}: not a regular file (a FIFO (named pipe); not opened)"
    )
    assert (summary["seen"], summary["skipped"]) == (3, 2)


def test_a_folder_named_like_audio_is_walked_as_a_folder(tmp_path):
    write_audio(tmp_path / "x.wav" / "a.wav")
    report = SkipReport()
    assert [r.id for r in iter_manifest(tmp_path, report)] == ["x.wav__a"]
    assert report.to_dict()["skipped"] == 0
