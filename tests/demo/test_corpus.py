import io
import json
import shutil
import wave
from dataclasses import replace

import pytest

from asr_pipeline.demo.corpus import (
    DemoCorpusParams,
    build_demo_corpus,
    layout_files,
    open_sentences,
    synthesize_corpus,
)
from asr_pipeline.demo.synthesis import split_voices
from asr_pipeline.io.manifests import iter_manifest
from asr_pipeline.io.report import SkipReport

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
TINY = DemoCorpusParams(train_size=6, dev_size=3, test_size=3, test_open_size=2, seed=7, jobs=2)
# A 2-3 s window on up-to-12-word sentences makes most first draws miss, exercising the redraw rounds.
NARROW = DemoCorpusParams(
    train_size=6,
    dev_size=3,
    test_size=3,
    test_open_size=0,
    seed=11,
    min_duration_sec=2.0,
    max_duration_sec=3.0,
    max_words=12,
)


@pytest.fixture(scope="module")
def tiny_files() -> dict[str, bytes]:
    return build_demo_corpus(TINY)


@needs_espeak
def test_layout_is_a_train_folder_with_sidecars_and_dev_test_manifests(tiny_files):
    train_ids = [f"train-{i:06d}" for i in range(1, 7)]
    expected = {f"train/{utt}.{ext}" for utt in train_ids for ext in ("wav", "txt")}
    for split, count in (("dev", 3), ("test", 3), ("test_open", 2)):
        expected |= {f"{split}.jsonl"} | {f"{split}/{split}-{i:06d}.wav" for i in range(1, count + 1)}
    assert set(tiny_files) == expected


@needs_espeak
def test_train_sidecars_hold_the_transcript_and_a_newline(tiny_files):
    for path, data in tiny_files.items():
        if path.endswith(".txt"):
            text = data.decode("utf-8")
            assert text.endswith("\n") and text.count("\n") == 1
            assert 2 <= len(text.split()) <= TINY.max_words


@needs_espeak
def test_manifest_rows_name_their_audio_relative_to_the_manifest(tiny_files):
    for split in ("dev", "test"):
        rows = [json.loads(line) for line in tiny_files[f"{split}.jsonl"].decode("utf-8").splitlines()]
        assert [row["id"] for row in rows] == [f"{split}-{i:06d}" for i in range(1, 4)]
        for row in rows:
            assert set(row) == {"id", "audio_path", "text", "speaker", "rate_wpm", "pitch"}
            assert row["audio_path"] == f"{split}/{row['id']}.wav"
            assert row["audio_path"] in tiny_files
            assert row["text"] and row["text"] == row["text"].strip()


@needs_espeak
def test_every_wav_is_22050_hz_mono_and_within_the_duration_window(tiny_files):
    for path, data in tiny_files.items():
        if path.endswith(".wav"):
            with wave.open(io.BytesIO(data)) as reader:
                assert (reader.getframerate(), reader.getnchannels()) == (22050, 1), path
                seconds = reader.getnframes() / reader.getframerate()
            assert TINY.min_duration_sec <= seconds <= TINY.max_duration_sec, path


@needs_espeak
def test_the_pipelines_manifest_reader_accepts_the_layout(tiny_files, tmp_path):
    for path, data in tiny_files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    report = SkipReport(strict=True)
    for source, count in (("train", 6), ("dev.jsonl", 3), ("test.jsonl", 3)):
        records = list(iter_manifest(tmp_path / source, report))
        assert len(records) == count
        assert all(r.text and (tmp_path / r.audio_path).is_file() for r in records)


@needs_espeak
def test_out_of_window_draws_are_redrawn_and_counted():
    corpus = synthesize_corpus(NARROW)
    durations = [u.duration_sec for utts in corpus.utterances.values() for u in utts]
    assert len(durations) == 12
    assert all(2.0 <= d <= 3.0 for d in durations)
    assert corpus.redraws.get("too_short", 0) + corpus.redraws.get("too_long", 0) > 0


@needs_espeak
def test_output_is_byte_identical_for_one_or_two_threads():
    single = layout_files(synthesize_corpus(replace(NARROW, jobs=1)))
    double = layout_files(synthesize_corpus(NARROW))
    assert list(single) == list(double)
    assert single == double


@needs_espeak
def test_a_different_seed_gives_a_different_corpus(tiny_files):
    other = build_demo_corpus(
        DemoCorpusParams(train_size=6, dev_size=3, test_size=3, test_open_size=2, seed=8)
    )
    assert set(other) == set(tiny_files)
    assert other["dev.jsonl"] != tiny_files["dev.jsonl"]
    assert other["train/train-000001.wav"] != tiny_files["train/train-000001.wav"]


@needs_espeak
def test_transcripts_are_unique_and_held_out_variants_stay_out_of_train():
    corpus = synthesize_corpus(TINY)
    texts = [u.text for utts in corpus.utterances.values() for u in utts]
    assert len(set(texts)) == len(texts)
    held_out = split_voices(TINY.seed)
    for split in ("dev", "test"):
        assert {(u.voice.name, u.voice.variant) for u in corpus.utterances[split]} <= set(held_out[split])
    train_variants = {variant for _, variant in held_out["train"]}
    assert {u.voice.variant for u in corpus.utterances["train"]} <= train_variants


@needs_espeak
def test_an_impossible_duration_window_fails_naming_the_utterance():
    params = DemoCorpusParams(
        train_size=1,
        dev_size=0,
        test_size=0,
        test_open_size=0,
        min_duration_sec=20.0,
        max_duration_sec=21.0,
        max_words=3,
    )
    with pytest.raises(RuntimeError, match=r"no usable draw for train-000001 in 50 draws.*\[20.0, 21.0\] s"):
        synthesize_corpus(params)


@needs_espeak
def test_the_open_test_set_speaks_the_hand_written_sentences_in_the_held_out_test_voices():
    corpus = synthesize_corpus(TINY)

    assert [u.text for u in corpus.utterances["test_open"]] == open_sentences()[:2]
    assert {(u.voice.name, u.voice.variant) for u in corpus.utterances["test_open"]} <= set(
        split_voices(TINY.seed)["test"]
    )


def test_the_open_sentences_are_written_apart_from_the_generators_words():
    from asr_pipeline.demo.sentences import generate_sentences

    sentences = open_sentences()
    generated = {word for sentence in generate_sentences(5000, seed=1) for word in sentence.split()}
    words = [word for sentence in sentences for word in sentence.split()]
    unseen = [word for word in words if word not in generated]

    assert len(sentences) >= 100 and len(set(sentences)) == len(sentences)
    assert 0.03 < len(unseen) / len(words) < 0.2, "some words the generator (and so the lexicon) never says"
    assert not set(sentences) & set(generate_sentences(5000, seed=1))


def test_a_missing_espeak_binary_fails_clearly():
    with pytest.raises(RuntimeError, match="not found"):
        build_demo_corpus(TINY, espeak_binary="/nonexistent/espeak-ng")


def test_from_dict_reads_known_keys_and_rejects_unknown_ones():
    assert DemoCorpusParams.from_dict({"train_size": 10, "jobs": 1}) == DemoCorpusParams(
        train_size=10, jobs=1
    )
    with pytest.raises(ValueError, match=r"demo_corpus: unknown option\(s\) \['train_sise'\].*train_size"):
        DemoCorpusParams.from_dict({"train_sise": 10})


@pytest.mark.parametrize(
    "bad",
    [
        {"train_size": -1},
        {"min_duration_sec": 5.0, "max_duration_sec": 5.0},
        {"max_words": 1},
        {"jobs": 0},
        {"test_open_size": 10_000},
        {"rate_wpm": (200, 150)},
        {"rate_wpm": (60, 150)},
        {"pitch": (0, 100)},
    ],
)
def test_invalid_params_are_rejected(bad):
    with pytest.raises(ValueError, match="demo_corpus"):
        DemoCorpusParams(**bad)


@needs_espeak
def test_every_utterance_speaks_within_the_rate_and_pitch_ranges_given():
    corpus = synthesize_corpus(replace(TINY, rate_wpm=(150, 160), pitch=(40, 45), test_open_size=1))
    voices = [utt.voice for utts in corpus.utterances.values() for utt in utts]
    assert len(voices) == 6 + 3 + 3 + 1
    assert all(150 <= v.rate_wpm <= 160 and 40 <= v.pitch <= 45 for v in voices)


def test_rate_and_pitch_ranges_read_from_params_yaml_lists():
    params = DemoCorpusParams.from_dict({"rate_wpm": [130, 210], "pitch": [20, 80]})
    assert (params.rate_wpm, params.pitch) == ((130, 210), (20, 80))
