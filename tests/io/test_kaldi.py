"""Kaldi data dirs through iter_manifest (io/kaldi.py): wav.scp + text, optional segments."""

import re

import numpy as np
import pytest

from asr_pipeline.io.audio_segment import load_audio_segment
from asr_pipeline.io.manifests import iter_manifest
from asr_pipeline.io.report import InputError, SkipReport
from tests.io.audio_files import write_audio, write_ramp


def make_data_dir(folder, wav_scp: str, text: str, segments: str | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wav.scp").write_text(wav_scp)
    (folder / "text").write_text(text)
    if segments is not None:
        (folder / "segments").write_text(segments)
    return folder


def skipped(report: SkipReport) -> dict:
    return report.to_dict()["skipped_by_reason"]


def test_without_segments_every_utterance_is_a_whole_recording(tmp_path):
    write_audio(tmp_path / "data" / "train" / "wav" / "spk1-utt1.flac")
    write_audio(tmp_path / "abs" / "spk1-utt2.wav")
    data = make_data_dir(
        tmp_path / "data" / "train",
        wav_scp=f"spk1-utt1 wav/spk1-utt1.flac\nspk1-utt2 {tmp_path / 'abs' / 'spk1-utt2.wav'}\n",
        text="spk1-utt1 HELLO THERE\nspk1-utt2 GENERAL KENOBI\n",
    )
    report = SkipReport()
    records = list(iter_manifest(data, report))
    assert [(r.id, r.text, r.offset_sec, r.duration_sec) for r in records] == [
        ("spk1-utt1", "HELLO THERE", None, None),
        ("spk1-utt2", "GENERAL KENOBI", None, None),
    ]
    assert records[0].audio_path == str(data / "wav" / "spk1-utt1.flac")  # relative to the data dir
    assert records[1].audio_path == str(tmp_path / "abs" / "spk1-utt2.wav")
    assert (records[0].location, records[0].kind) == (f"{data / 'text'}:1", "audio_file")
    assert (report.seen, report.skipped) == (2, 0)


def test_segments_cut_a_recording_into_utterances_carrying_offset_and_duration(tmp_path):
    data = make_data_dir(
        tmp_path / "train",
        wav_scp="meeting1 meeting1.wav\n",
        text="m1-a first words\nm1-b second words\nm1-c the rest\n",
        segments="m1-a meeting1 0.00 0.50\nm1-b meeting1 0.50 1.25\nm1-c meeting1 1.25 -1\n",
    )
    records = list(iter_manifest(data, SkipReport()))
    assert [(r.id, r.offset_sec, r.duration_sec) for r in records] == [
        ("m1-a", 0.0, 0.5),
        ("m1-b", 0.5, 0.75),
        ("m1-c", 1.25, None),  # end -1: to the end of the recording, as in Kaldi's extract-segments
    ]
    assert {r.audio_path for r in records} == {str(data / "meeting1.wav")}


def test_segment_records_decode_to_their_part_of_the_recording(tmp_path):
    data = make_data_dir(
        tmp_path / "train",
        wav_scp="rec rec.flac\n",
        text="u1 one\nu2 two\n",
        segments="u1 rec 0.25 0.75\nu2 rec 1.5 -1\n",
    )
    samples = write_ramp(data / "rec.flac", sample_rate=16000, seconds=2.0)  # (32000,)
    u1, u2 = iter_manifest(data, SkipReport())
    cut1 = load_audio_segment(u1.audio_path, 16000, u1.offset_sec, u1.duration_sec)
    cut2 = load_audio_segment(u2.audio_path, 16000, u2.offset_sec, u2.duration_sec)
    np.testing.assert_array_equal(cut1, samples[4000:12000])  # 0.25 s * 16000 .. 0.75 s * 16000
    np.testing.assert_array_equal(cut2, samples[24000:])


def test_a_piped_wav_scp_command_is_counted_as_unsupported_naming_the_wav_scp_line(tmp_path):
    data = make_data_dir(
        tmp_path / "train",
        wav_scp="ok ok.wav\npiped sph2pipe -f wav -p -c 1 /corpus/x.sph |\n",
        text="ok fine\npiped not readable\n",
    )
    report = SkipReport()
    assert [r.id for r in iter_manifest(data, report)] == ["ok"]
    assert skipped(report) == {"piped command in wav.scp (unsupported)": 1}
    [message] = report.to_dict()["first_skipped"]["piped command in wav.scp (unsupported)"]
    assert message.startswith(
        f"{data / 'wav.scp'}:2: piped command in wav.scp (unsupported) (utterance 'piped'"
    )
    with pytest.raises(InputError, match=r"wav\.scp:2: piped command in wav\.scp \(unsupported\)"):
        list(iter_manifest(data, SkipReport(strict=True)))


def test_every_segment_of_a_piped_recording_is_counted(tmp_path):
    data = make_data_dir(
        tmp_path / "train",
        wav_scp="rec gunzip -c rec.wav.gz |\n",
        text="u1 a\nu2 b\n",
        segments="u1 rec 0 1\nu2 rec 1 2\n",
    )
    report = SkipReport()
    assert list(iter_manifest(data, report)) == []
    assert (report.seen, skipped(report)) == (2, {"piped command in wav.scp (unsupported)": 2})


def test_an_archive_offset_in_wav_scp_is_counted_as_unsupported(tmp_path):
    data = make_data_dir(tmp_path / "train", wav_scp="u1 /feats/raw_wav.1.ark:1234\n", text="u1 hi\n")
    report = SkipReport()
    assert list(iter_manifest(data, report)) == []
    assert skipped(report) == {"archive offset in wav.scp (unsupported)": 1}


def test_an_utterance_whose_recording_is_missing_is_counted_at_its_text_line(tmp_path):
    data = make_data_dir(tmp_path / "train", wav_scp="a a.wav\n", text="a fine\nb lost\n")
    report = SkipReport()
    assert [r.id for r in iter_manifest(data, report)] == ["a"]
    [message] = report.to_dict()["first_skipped"]["no audio for utterance"]
    assert message.startswith(
        f"{data / 'text'}:2: no audio for utterance (utterance 'b': recording 'b' is not in"
    )


def test_an_utterance_missing_from_segments_is_counted_at_its_text_line(tmp_path):
    data = make_data_dir(
        tmp_path / "train", wav_scp="rec rec.wav\n", text="u1 a\nu2 b\n", segments="u1 rec 0 1\n"
    )
    report = SkipReport()
    assert [r.id for r in iter_manifest(data, report)] == ["u1"]
    assert report.to_dict()["first_skipped"]["no audio for utterance"][0].startswith(f"{data / 'text'}:2")


def test_a_recording_no_text_line_names_is_counted_as_no_transcript(tmp_path):
    data = make_data_dir(tmp_path / "train", wav_scp="a a.wav\nb b.wav\n", text="a fine\n")
    report = SkipReport()
    assert [r.id for r in iter_manifest(data, report)] == ["a"]
    assert report.to_dict()["first_skipped"]["no transcript"] == [
        f"{data / 'wav.scp'}:2: no transcript ('b' has no line in {data / 'text'})"
    ]
    assert (report.seen, report.kept + report.skipped) == (2, 1)  # kept is counted by the caller


def test_with_segments_a_segment_without_text_is_counted_and_unsegmented_recordings_are_not(tmp_path):
    data = make_data_dir(
        tmp_path / "train",
        wav_scp="rec rec.wav\nunused unused.wav\n",
        text="u1 a\n",
        segments="u1 rec 0 1\nu2 rec 1 2\n",
    )
    report = SkipReport()
    assert [r.id for r in iter_manifest(data, report)] == ["u1"]
    assert report.to_dict()["first_skipped"]["no transcript"] == [
        f"{data / 'segments'}:2: no transcript ('u2' has no line in {data / 'text'})"
    ]


@pytest.mark.parametrize(
    ("segment", "reason"),
    [
        ("u1 rec 2.0 1.0", "invalid segment"),  # ends before it starts
        ("u1 rec 1.0 1.0", "invalid segment"),  # empty
        ("u1 rec -0.5 1.0", "invalid segment"),
        ("u1 rec zero 1.0", "invalid segment"),
        ("u1 rec 0 nan", "invalid segment"),
        ("u1 rec 0", "invalid segment"),
        ("u1 rec 0 1 1", "segment channel (unsupported)"),
    ],
)
def test_bad_segments_are_counted_naming_the_segments_line(tmp_path, segment, reason):
    data = make_data_dir(
        tmp_path / "train",
        wav_scp="rec rec.wav\n",
        text="u0 ok\nu1 bad\n",
        segments=f"u0 rec 0 1\n{segment}\n",
    )
    report = SkipReport()
    assert [r.id for r in iter_manifest(data, report)] == ["u0"]
    assert skipped(report) == {reason: 1}
    assert report.to_dict()["first_skipped"][reason][0].startswith(f"{data / 'segments'}:2: {reason}")
    with pytest.raises(InputError, match=rf"segments:2: {re.escape(reason)}"):
        list(iter_manifest(data, SkipReport(strict=True)))


def test_a_repeated_recording_id_is_counted_and_the_first_kept(tmp_path):
    data = make_data_dir(tmp_path / "train", wav_scp="a first.wav\na second.wav\n", text="a hi\n")
    report = SkipReport()
    [record] = iter_manifest(data, report)
    assert record.audio_path == str(data / "first.wav")
    assert report.to_dict()["first_skipped"]["duplicate id"][0].startswith(f"{data / 'wav.scp'}:2")


def test_a_data_dir_without_text_is_rejected_saying_what_is_missing(tmp_path):
    (tmp_path / "wav.scp").write_text("a a.wav\n")
    with pytest.raises(InputError, match=r"needs a `text` file next to it"):
        list(iter_manifest(tmp_path, SkipReport()))


def test_an_empty_transcript_is_kept_for_the_transcripts_stage_to_judge(tmp_path):
    data = make_data_dir(tmp_path / "train", wav_scp="a a.wav\n", text="a\n")
    [record] = iter_manifest(data, SkipReport())
    assert record.text == ""
