"""``asr-pipeline extract-features``: frontends, float16 shards, the --tui view, crash safety, a run that keeps
nothing, extraction without a tokenizer and transcripts the tokenizer cannot spell."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asr_pipeline.cli import main
from asr_pipeline.data.length_index import build_length_index
from asr_pipeline.io.audio import NOT_AUDIO
from asr_pipeline.io.shards import iter_examples, list_shards
from asr_pipeline.text.sentencepiece_training import SentencePieceOptions, train_sentencepiece
from asr_pipeline.tui import LiveView
from tests.conftest import TINY_SENTENCES, make_wav

CONSOLE_SCRIPT = Path(sys.executable).with_name("asr-pipeline")


def run_cli(*parts: object) -> dict:
    """``main`` in this process; must succeed; returns the printed JSON report."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main([str(part) for part in parts]) == 0, parts
    return json.loads(stdout.getvalue())


@pytest.fixture(scope="module")
def tokenizer_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.model"
    path.write_bytes(train_sentencepiece(TINY_SENTENCES, SentencePieceOptions(vocab_size=40)))
    return path


@pytest.fixture(scope="module")
def audio_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """utt0..utt3 tones of 0.5, 0.6, 1.5 (too long at --max-audio-duration-sec 1) and 0.8 s; a broken file."""
    folder = tmp_path_factory.mktemp("audio")
    for i, seconds in enumerate([0.5, 0.6, 1.5, 0.8]):
        (folder / f"utt{i}.wav").write_bytes(make_wav(seconds=seconds, freq=300.0 + 40 * i))
        (folder / f"utt{i}.txt").write_text(TINY_SENTENCES[i], encoding="utf-8")
    (folder / "utt9.wav").write_bytes(b"this is not audio" * 8)
    (folder / "utt9.txt").write_text("a broken recording", encoding="utf-8")
    return folder


def test_w2v_bert_architecture_in_float16_writes_160_wide_half_float_shards(
    tmp_path, audio_folder, tokenizer_model
):
    output = tmp_path / "shards"

    report = run_cli(
        "extract-features", "--input", audio_folder, "--output", output, "--tokenizer", tokenizer_model,
        "--architecture", "w2v-bert", "--feature-dtype", "float16", "--max-audio-duration-sec", "1",
    )  # fmt: skip

    table = pq.read_table(output / "shard-00000.parquet")
    assert report["kept"] == 3 and table.column("id").to_pylist() == ["utt0", "utt1", "utt3"]
    assert table.schema.field("features").type.value_type == pa.float16()
    assert set(table.column("cols").to_pylist()) == {160}
    # 0.5 s at 16 kHz: 1 + (8000 - 400) // 160 = 48 Kaldi frames, stacked by two
    assert table.column("rows").to_pylist()[0] == 24
    assert all(
        example["features"].shape[1] == 160 for example in iter_examples(output / "shard-00000.parquet")
    )


def test_tui_shows_counts_skips_by_reason_the_input_and_the_last_example(
    tmp_path, audio_folder, tokenizer_model, monkeypatch, capsys
):
    views: list[LiveView] = []

    class RecordedView(LiveView):
        def __exit__(self, *exc_info: object) -> None:
            views.append(self)
            super().__exit__(*exc_info)

    monkeypatch.setattr("asr_pipeline.tui.LiveView", RecordedView)

    status = main(
        [
            "extract-features", "--input", str(audio_folder), "--output", str(tmp_path / "out"),
            "--tokenizer", str(tokenizer_model), "--max-audio-duration-sec", "1", "--tui",
        ]
    )  # fmt: skip

    assert status == 0
    (view,) = views
    values = view.values
    assert (values["seen"], values["decoded"], values["kept"]) == (5, 4, 3)
    assert values["skipped: longer than max_audio_duration_sec"] == 1
    assert sum(count for name, count in values.items() if name.startswith("skipped: ")) == 2
    assert values["file"] == str(audio_folder / "utt9.wav"), "the last row read"
    assert str(audio_folder) in values["input"]
    # utt3, 0.8 s: 1 + (12800 - 400) // 160 = 78 frames
    assert values["last_example"] == "utt3  0.80 s  78 frames"
    assert any("utt2" in line and "longer than max_audio_duration_sec" in line for line in view.events)
    assert "extract-features" in capsys.readouterr().err, "without a terminal the final table is printed"


def test_a_killed_extraction_leaves_only_complete_shards_and_a_rerun_writes_the_same_bytes(
    tmp_path, tokenizer_model
):
    """SIGKILL while shards are being written: every shard list_shards shows reads back whole and equals the
    uninterrupted run's; half-written ones are ``.tmp`` files it ignores; a rerun gives identical bytes."""
    wav = tmp_path / "speech.wav"
    wav.write_bytes(make_wav(seconds=3.0, freq=220.0))
    manifest = tmp_path / "manifest.jsonl"
    lines = [
        json.dumps({"id": f"utt{i:04d}", "audio_path": str(wav), "text": TINY_SENTENCES[i % 8]})
        for i in range(600)
    ]
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flags = ["--input", str(manifest), "--tokenizer", str(tokenizer_model), "--shard-size", "20"]
    complete = tmp_path / "complete"
    run_cli("extract-features", "--output", complete, *flags)
    expected = {path.name: path.read_bytes() for path in list_shards(complete)}
    assert len(expected) == 30

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        [str(CONSOLE_SCRIPT), "extract-features", "--output", str(killed), *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while (
        not (killed / "shard-00001.parquet").exists()
        and process.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()

    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    listed = list_shards(killed)
    assert 2 <= len(listed) < len(expected)
    for path in listed:
        assert pq.read_table(path).num_rows == 20
        assert path.read_bytes() == expected[path.name], path.name
    leftovers = {path.name for path in killed.iterdir()} - {path.name for path in listed}
    assert all(name.endswith(".parquet.tmp") for name in leftovers), leftovers

    run_cli("extract-features", "--output", killed, *flags)

    assert {path.name: path.read_bytes() for path in killed.iterdir()} == expected


def run_failing_cli(capsys: pytest.CaptureFixture, *parts: object) -> tuple[int, list[str]]:
    """``main`` in this process, expected to fail; returns its status and its stderr's error lines."""
    status = main([str(part) for part in parts])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, [line for line in err.splitlines() if "error:" in line]


@pytest.mark.parametrize("output_name", ["shards", "one.parquet"])
def test_when_every_record_is_skipped_it_exits_1_with_the_skips_by_reason_and_writes_no_shard(
    tmp_path, tokenizer_model, capsys, output_name
):
    folder = tmp_path / "broken"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.wav").write_bytes(b"this is not audio" * 8)
        (folder / f"{name}.txt").write_text("a broken recording", encoding="utf-8")
    (folder / "c.wav").write_bytes(make_wav(seconds=0.5))
    (folder / "c.txt").write_text("?!", encoding="utf-8")  # nothing left after normalization
    output = tmp_path / output_name

    status, errors = run_failing_cli(
        capsys, "extract-features", "--input", folder, "--output", output, "--tokenizer", tokenizer_model
    )

    assert status == 1 and len(errors) == 1
    assert errors[0].startswith("asr-pipeline extract-features: error: extract-features: all 3 records were")
    assert "empty transcript: 1" in errors[0] and f"{NOT_AUDIO}: 2" in errors[0], "reading's and extraction's"
    assert str(folder / "a.wav") in errors[0]
    assert not output.exists() or not any(output.iterdir()), "no empty shard"


def test_without_a_tokenizer_shards_hold_empty_tokens_and_the_normalized_text(tmp_path, audio_folder):
    output = tmp_path / "unlabelled"

    report = run_cli(
        "extract-features", "--input", audio_folder, "--output", output, "--max-audio-duration-sec", "1"
    )

    assert report["kept"] == 3 and "kept_with" not in report
    (shard,) = list_shards(output)
    examples = list(iter_examples(shard))
    assert [(e["id"], e["tokens"], e["text"]) for e in examples] == [
        ("utt0", [], TINY_SENTENCES[0]),
        ("utt1", [], TINY_SENTENCES[1]),
        ("utt3", [], TINY_SENTENCES[3]),
    ]
    index = build_length_index([shard])  # what training and `asr-pipeline index` read
    assert index.column("tokens").to_pylist() == [0, 0, 0]


def test_the_summary_counts_utterances_with_unknown_pieces_and_skips_those_above_the_share(
    tmp_path, tokenizer_model
):
    folder = tmp_path / "mixed"
    folder.mkdir()
    for name, text in [("english", "the cat sat"), ("name", "the quick josé"), ("cyrillic", "привет мир")]:
        (folder / f"{name}.wav").write_bytes(make_wav(seconds=0.5))
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    flags = ["--input", folder, "--tokenizer", tokenizer_model]

    report = run_cli("extract-features", "--output", tmp_path / "a", *flags)
    keep_all = run_cli(
        "extract-features", "--output", tmp_path / "b", *flags, "--max-unknown-token-share", "1"
    )

    assert report["kept"] == 2 and report["skipped_by_reason"] == {"too many unknown pieces": 1}
    assert report["kept_with"] == {"unknown pieces": {"count": 1, "share": 0.5}}
    assert keep_all["kept"] == 3 and keep_all["kept_with"]["unknown pieces"]["count"] == 2


def test_a_kaldi_dir_with_segments_gives_each_utterance_only_its_own_stretch_of_the_recording(
    tmp_path, tokenizer_model
):
    from tests.io.audio_files import write_ramp

    data = tmp_path / "kaldi"
    ramp = write_ramp(data / "meeting.wav", seconds=2.0)  # (32000,) samples that say where they are
    (data / "wav.scp").write_text("meeting meeting.wav\n")
    (data / "text").write_text(f"m-a {TINY_SENTENCES[0]}\nm-b {TINY_SENTENCES[1]}\nm-c {TINY_SENTENCES[2]}\n")
    (data / "segments").write_text("m-a meeting 0.00 0.50\nm-b meeting 0.50 1.25\nm-c meeting 1.25 -1\n")

    report = run_cli(
        "extract-features", "--input", data, "--tokenizer", tokenizer_model, "--output", tmp_path / "out"
    )

    assert report["kept"] == 3
    examples = {e["id"]: e for shard in list_shards(tmp_path / "out") for e in iter_examples(shard)}
    assert {i: e["duration_ms"] for i, e in examples.items()} == {"m-a": 500, "m-b": 750, "m-c": 750}
    # 25 ms windows every 10 ms (snip edges): 48 frames in 0.5 s, 73 in 0.75 s; not the recording's 198.
    assert {i: e["rows"] for i, e in examples.items()} == {"m-a": 48, "m-b": 73, "m-c": 73}
    assert len(ramp) == 32000
