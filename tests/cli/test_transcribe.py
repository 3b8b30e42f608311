"""``asr-pipeline transcribe``: audio files of any format and rate, folders and manifests in; txt, JSONL with
word times and SRT out; long files in windows; unreadable files counted (or, with --strict, an error naming
them). The run holds an untrained tiny model: these tests check the plumbing and the frontend, not accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from asr_pipeline.cli import main
from asr_pipeline.decoding.transcribe import run_frontend
from asr_pipeline.features.extract import ExtractionOptions, extract_records
from asr_pipeline.features.fbank_options import FbankOptions
from asr_pipeline.io.audio import NOT_AUDIO, load_audio
from asr_pipeline.io.report import SkipReport
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.run_layout import CHECKPOINT_DIR, EMA_FILE
from tests.conftest import make_wav
from tests.factories import NUM_BINS, untrained_run


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``run/`` (the tiny model, untrained, on NUM_BINS fbank bins) and ``audio/``: a 22.05 kHz WAV, a 44.1 kHz
    stereo FLAC, a 45 s WAV and a file that is not audio."""
    root = tmp_path_factory.mktemp("transcribe")
    untrained_run(root)
    audio = root / "audio"
    audio.mkdir()
    (audio / "a_tone.wav").write_bytes(make_wav(seconds=1.5, freq=300.0))
    rng = np.random.default_rng(0)
    soundfile.write(audio / "b_noise.flac", rng.uniform(-0.3, 0.3, (44100, 2)).astype(np.float32), 44100)
    (audio / "c_long.wav").write_bytes(make_wav(seconds=45.0, sample_rate=16000, freq=220.0))
    (audio / "d_broken.wav").write_bytes(b"RIFF this is not audio" * 4)
    return root


def transcribe(capsys, *parts: object) -> tuple[int, str, str]:
    status = main(["transcribe", *map(str, parts)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_run_frontend_makes_exactly_the_features_extraction_writes_for_its_shards(workdir):
    path = workdir / "audio" / "b_noise.flac"  # 44.1 kHz stereo: decoding, downmix and resampling too
    run = load_run_model(workdir / "run")
    options = ExtractionOptions(fbank=FbankOptions(num_mel_bins=NUM_BINS), input_dim=NUM_BINS)
    row = {"id": "b", "location": str(path), "audio_path": str(path), "text": None}
    [record] = extract_records([row], None, options, SkipReport())

    features = run_frontend(run)(load_audio(path, 16000))

    np.testing.assert_array_equal(features, record["features"])


def test_a_folder_is_transcribed_file_by_file_and_a_broken_file_is_a_counted_skip(workdir, capsys):
    status, out, err = transcribe(
        capsys, workdir / "audio", "--run-dir", workdir / "run", "--output", "jsonl"
    )

    assert status == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [Path(row["source"]).name for row in rows] == ["a_tone.wav", "b_noise.flac", "c_long.wav"]
    assert [row["duration_sec"] for row in rows] == [1.5, 1.0, 45.0]
    summary = json.loads(err.strip().splitlines()[-1])
    assert (summary["seen"], summary["kept"], summary["skipped"]) == (4, 3, 1)
    assert summary["skipped_by_reason"] == {NOT_AUDIO: 1}
    assert "d_broken.wav" in summary["first_skipped"][NOT_AUDIO][0]
    for row in rows:  # word times, where there are words, lie inside the recording and in order
        times = [t for word in row["words"] for t in (word["start"], word["end"])]
        assert times == sorted(times) and all(0 <= t <= row["duration_sec"] for t in times)


def test_a_long_file_is_cut_into_windows_of_at_most_window_sec(workdir, capsys):
    status, out, _ = transcribe(
        capsys, workdir / "audio" / "c_long.wav", "--run-dir", workdir / "run", "--output", "jsonl"
    )

    assert status == 0
    [row] = [json.loads(line) for line in out.splitlines()]
    spans = [(window["start"], window["end"]) for window in row["windows"]]
    assert all(end - start <= 20.0 for start, end in spans)
    # An untrained model may say nothing in a window; the windows it spoke in are in order and in range.
    assert spans == sorted(spans) and all(0 <= start < end <= 45.0 for start, end in spans)


def test_strict_mode_stops_at_the_broken_file_naming_it(workdir, capsys):
    status, _, err = transcribe(capsys, workdir / "audio", "--run-dir", workdir / "run", "--strict")

    assert status == 1
    assert "d_broken.wav" in err and NOT_AUDIO in err


def test_every_input_skipped_exits_1_with_one_line_naming_the_skipped_file(workdir, capsys):
    status, out, err = transcribe(capsys, workdir / "audio" / "d_broken.wav", "--run-dir", workdir / "run")

    assert status == 1 and out == ""
    [line] = [line for line in err.splitlines() if "error:" in line]
    assert line.startswith("asr-pipeline transcribe: error: transcribe: all 1 records were skipped")
    assert "skipped by reason: " in line and "d_broken.wav" in line  # the reason is io.audio's to name


def test_a_manifest_names_its_rows_by_id_and_txt_shows_the_source_with_several_inputs(
    workdir, tmp_path, capsys
):
    manifest = tmp_path / "talks.jsonl"
    rows = [{"id": "first", "audio_path": str(workdir / "audio" / "a_tone.wav"), "text": "x"},
            {"id": "second", "audio_path": str(workdir / "audio" / "b_noise.flac"), "text": "y"}]  # fmt: skip
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "out" / "talks.txt"

    status, out, _ = transcribe(capsys, manifest, "--run-dir", workdir / "run", "--output-path", output)

    assert status == 0 and json.loads(out)["transcribed"] == 2
    assert [line.split("\t")[0] for line in output.read_text().splitlines()] == ["first", "second"]


def test_srt_of_several_inputs_goes_to_a_folder_one_file_each(workdir, tmp_path, capsys):
    audio = workdir / "audio"
    inputs = [audio / "a_tone.wav", audio / "c_long.wav"]

    status, _, err = transcribe(capsys, *inputs, "--run-dir", workdir / "run", "--output", "srt")
    assert status == 2 and "--output srt with several inputs needs --output-path FOLDER" in err

    status, _, _ = transcribe(
        capsys, *inputs, "--run-dir", workdir / "run", "--output", "srt", "--output-path", tmp_path / "subs"
    )
    assert status == 0
    assert sorted(path.name for path in (tmp_path / "subs").iterdir()) == ["a_tone.srt", "c_long.srt"]
    for path in (tmp_path / "subs").iterdir():
        text = path.read_text()
        assert text == "" or text.startswith("1\n00:00:")


def test_a_missing_input_or_a_lexicon_decoder_without_lexicon_is_a_usage_error(workdir, capsys):
    status, _, err = transcribe(capsys, workdir / "nope.wav", "--run-dir", workdir / "run")
    assert status == 2 and "nope.wav: no such file or folder" in err

    status, _, err = transcribe(
        capsys, workdir / "audio" / "a_tone.wav", "--run-dir", workdir / "run", "--decoder", "lexicon"
    )
    assert status == 2 and "--decoder lexicon needs --lexicon" in err


def test_transcribe_weights_ema_of_a_run_without_one_is_one_line_naming_the_file_and_the_setting(
    workdir, capsys
):
    status, _, err = transcribe(capsys, workdir / "audio" / "a_tone.wav", "--run-dir", workdir / "run",
                                "--weights", "ema")  # fmt: skip

    assert status == 1 and err.count("\n") == 1
    assert f"--weights ema: {workdir / 'run' / CHECKPOINT_DIR / EMA_FILE} does not exist" in err
    assert "optim.ema_decay" in err
