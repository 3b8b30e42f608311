"""decoding.transcribe: windows that cover the recording (cut at a silence when asked), word timestamps from the
CTC frames at the right offsets, the texts of every window joined, and the SRT/JSONL/txt forms."""

from __future__ import annotations

import itertools
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from asr_pipeline.decoding.decoders import GreedyDecoder
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.decoding.transcribe import (
    Transcriber,
    Transcript,
    WindowOptions,
    Word,
    audio_inputs,
    format_jsonl,
    format_srt,
    format_txt,
    split_windows,
    srt_cues,
    token_spans,
    transcribe_inputs,
)
from asr_pipeline.io.report import SkipReport
from asr_pipeline.models.loading import RunModel
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.factories import NUM_BINS, char_tokenizer_model

RATE = 16000


# --- windows -------------------------------------------------------------------------------------------
def test_fixed_windows_cover_the_recording_in_window_sec_pieces():
    windows = split_windows(
        np.ones(5 * RATE + 100, np.float32), RATE, WindowOptions(window_sec=2, split="fixed")
    )

    assert windows == [(0, 32000), (32000, 64000), (64000, 80100)]


def test_a_silence_window_is_cut_in_the_quiet_gap_before_its_limit():
    audio = np.random.default_rng(0).uniform(-0.5, 0.5, 5 * RATE).astype(np.float32)
    audio[int(1.2 * RATE) : int(1.5 * RATE)] = 0.0  # 300 ms of silence inside the 1 s before the 2 s limit

    windows = split_windows(audio, RATE, WindowOptions(window_sec=2, split="silence", search_sec=1.0))

    first_cut = windows[0][1]
    assert 1.2 * RATE <= first_cut <= 1.5 * RATE
    assert windows[0][0] == 0 and windows[-1][1] == len(audio)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(windows)), "contiguous"
    assert all(stop - start <= 2 * RATE for start, stop in windows)


@pytest.mark.parametrize(
    ("values", "message"),
    [({"window_sec": 0}, "window_sec must be > 0"), ({"split": "vad"}, "split must be fixed or silence"),
     ({"search_sec": -1}, "search_sec must be >= 0")],
)  # fmt: skip
def test_bad_window_options_are_refused(values, message):
    with pytest.raises(ValueError, match=message):
        WindowOptions(**values)


# --- timestamps ------------------------------------------------------------------------------------------
def test_each_run_of_one_id_in_a_ctc_path_is_one_token():
    path = torch.tensor([0, 3, 3, 0, 0, 3, 4, 4, 0, 5])

    assert token_spans(path, blank=0) == [(1, 2), (5, 5), (6, 7), (9, 9)]


class SpellingModel(nn.Module):
    """A stand-in acoustic model: 4x subsampling, and log-probs that put token ``k`` of ``tokens`` on output
    frames ``START + 3k`` and ``START + 3k + 1`` of every window, blank elsewhere."""

    START = 2

    def __init__(self, tokens: list[int], vocab: int) -> None:
        super().__init__()
        self.tokens, self.vocab = tokens, vocab
        self.anchor = nn.Parameter(torch.zeros(1))  # a device to report

    def forward(self, features: torch.Tensor, lengths: torch.Tensor):
        frames = int(lengths[0]) // 4
        scores = torch.full((1, frames, self.vocab), -20.0)
        scores[0, :, 0] = 0.0
        for k, token in enumerate(self.tokens):
            for frame in (self.START + 3 * k, self.START + 3 * k + 1):
                scores[0, frame, 0], scores[0, frame, token] = -20.0, 0.0
        return scores.log_softmax(-1), torch.tensor([frames])


@pytest.fixture(scope="module")
def tokenizer() -> CTCTokenizer:
    return CTCTokenizer(char_tokenizer_model())


def spelling_transcriber(tokenizer: CTCTokenizer, text: str, window: WindowOptions) -> Transcriber:
    model = SpellingModel(tokenizer.encode(text), tokenizer.vocab_size)
    run = RunModel(model, "squeezeformer", 0, "ctc", {}, {"data": {"input_dim": NUM_BINS}})
    return Transcriber(run, tokenizer, GreedyDecoder(DecodingOptions(), tokenizer), window)


def test_words_are_timed_from_their_tokens_frames_in_every_window(tokenizer):
    text = "ab cde"
    transcriber = spelling_transcriber(tokenizer, text, WindowOptions(window_sec=2.0, split="fixed"))
    audio = np.random.default_rng(1).uniform(-0.3, 0.3, 4 * RATE).astype(np.float32)  # two windows of 2 s

    transcript = transcriber.transcribe(audio, "talk.wav")

    assert transcript.text == "ab cde ab cde"
    # A 2 s window: 198 fbank frames (25 ms every 10 ms), 49 output frames of 2/49 s each.
    frame_sec = 2.0 / (198 // 4)
    first_a = SpellingModel.START  # tokens: ▁a? b ▁c? d e: each word's first and last token
    ab = tokenizer.encode("ab")
    starts_of = [SpellingModel.START + 3 * k for k in range(len(tokenizer.encode(text)))]
    end_ab = starts_of[len(ab) - 1] + 2
    end_cde = starts_of[-1] + 2
    expected = []
    for offset in (0.0, 2.0):
        expected += [
            Word("ab", round(offset + first_a * frame_sec, 3), round(offset + end_ab * frame_sec, 3)),
            Word(
                "cde",
                round(offset + starts_of[len(ab)] * frame_sec, 3),
                round(offset + end_cde * frame_sec, 3),
            ),
        ]
    assert transcript.words == expected
    assert transcript.windows == [(0.0, 2.0, "ab cde"), (2.0, 4.0, "ab cde")]
    assert transcript.duration_sec == 4.0


def test_a_run_without_frame_posteriors_gives_untimed_words_and_window_cues(tokenizer):
    transcriber = spelling_transcriber(tokenizer, "ab", WindowOptions(window_sec=2.0, split="fixed"))
    transcriber.run = RunModel(transcriber.run.model, "paraformer", 0, "paraformer", {}, {})

    transcript = transcriber.transcribe(np.full(RATE, 0.1, np.float32), "x.wav")

    assert transcript.words == [Word("ab", None, None)]
    assert srt_cues(transcript) == [(0.0, 1.0, "ab")]


# --- output forms --------------------------------------------------------------------------------------------
def transcript_of(words: list[tuple[str, float, float]]) -> Transcript:
    text = " ".join(word for word, _, _ in words)
    return Transcript("a/b.wav", text, 30.0, [Word(*word) for word in words], [(0.0, 30.0, text)])


def test_srt_cues_break_at_five_seconds_and_at_a_long_pause():
    transcript = transcript_of(
        [("one", 0.0, 0.5), ("two", 0.6, 1.0), ("three", 3.0, 3.4), ("four", 3.5, 7.9), ("five", 8.1, 8.6)]
    )

    assert srt_cues(transcript) == [(0.0, 1.0, "one two"), (3.0, 7.9, "three four"), (8.1, 8.6, "five")]
    assert format_srt(transcript).splitlines()[:7] == [
        "1", "00:00:00,000 --> 00:00:01,000", "one two", "", "2", "00:00:03,000 --> 00:00:07,900", "three four",
    ]  # fmt: skip


def test_txt_and_jsonl_forms():
    transcript = transcript_of([("hello", 0.25, 0.75)])

    assert format_txt(transcript, with_source=False) == "hello\n"
    assert format_txt(transcript, with_source=True) == "a/b.wav\thello\n"
    row = json.loads(format_jsonl(transcript))
    assert row["words"] == [{"word": "hello", "start": 0.25, "end": 0.75}]
    assert row["windows"] == [{"start": 0.0, "end": 30.0, "text": "hello"}] and row["duration_sec"] == 30.0


# --- inputs ---------------------------------------------------------------------------------------------
def test_inputs_that_are_not_audio_files_are_counted_saying_what_they_are_and_never_opened(
    tmp_path, monkeypatch
):
    import soundfile

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "folder"
    folder.mkdir()
    soundfile.write(folder / "ok.wav", np.full(1600, 0.1), RATE, subtype="PCM_16")
    (folder / "x.wav").mkdir()  # named like audio
    os.mkfifo(folder / "pipe.wav")  # opening it for reading would block the run
    (tmp_path / "m.jsonl").write_text(
        "".join(json.dumps({"id": i, "audio_path": a}) + "\n" for i, a in [("d", "."), ("z", "/dev/zero")])
    )
    echo = SimpleNamespace(
        frontend=SimpleNamespace(sample_rate=RATE), transcribe=lambda waveform, source: source
    )
    report = SkipReport()

    kept = list(transcribe_inputs(echo, audio_inputs(["folder", "", "/dev/zero", "m.jsonl"], report), report))

    assert kept == ["folder/ok.wav"], "the empty path is not the working folder"
    summary = report.to_dict()
    assert summary["skipped_by_reason"] == {"a directory": 2, "empty path": 1, "not a regular file": 3}
    assert (summary["seen"], summary["kept"], summary["skipped"]) == (7, 1, 6), (
        "each manifest row counted once"
    )
    assert summary["first_skipped"]["not a regular file"][0].startswith(
        "folder/pipe.wav: not a regular file (folder/pipe.wav: a FIFO (named pipe), not a regular file; it is not opened"
    )
