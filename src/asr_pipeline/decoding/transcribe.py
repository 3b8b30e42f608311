"""Transcribe audio files with a trained run: windows, the run's own frontend, any decoder, word timestamps.

A recording of any length and any format or rate ``io.audio`` reads is decoded at the frontend's rate and cut
into windows of at most ``window_sec`` (``WindowOptions``): ``fixed`` cuts every ``window_sec``; ``silence`` cuts
at the quietest 20 ms of the last ``search_sec`` before each limit, so a cut falls between words where it can.
Each window runs through the run's frontend (``features.frontends``: what its features were made with), the
model and the decoder; the window texts are joined with spaces.

Word timestamps come from the CTC frames: the decoded words are spelled with the run's tokenizer and
force-aligned to the window's log-probs (``modules.forced_alignment``), so they hold for any decoder, LM or
not. A word starts at its first token's first frame and ends after its last token's last frame; an output
frame lasts the window's audio over its output frame count (the frontend's shift times the model's
subsampling). A Paraformer-style run has no frame posteriors: its words carry no times, and the window's
bounds time its text.

    T  feature frames of a window     F  feature width     T' model output frames     V  vocabulary
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from asr_pipeline.decoding.decoders import Decoder
from asr_pipeline.decoding.windows import WindowOptions, split_windows
from asr_pipeline.features.fbank_options import FbankOptions
from asr_pipeline.features.frontends import Frontend, frontend_named
from asr_pipeline.io.audio import AUDIO_EXTENSIONS, AudioDecodeError, load_audio
from asr_pipeline.io.manifests import iter_manifest
from asr_pipeline.io.report import SkipReport
from asr_pipeline.models.loading import RunModel
from asr_pipeline.models.registry import frontend_of
from asr_pipeline.models.spec import has_frame_posteriors
from asr_pipeline.modules.forced_alignment import forced_paths
from asr_pipeline.text.tokenizer import CTCTokenizer

MANIFEST_SUFFIXES = (".jsonl", ".json", ".tsv", ".parquet")


@dataclass(frozen=True)
class Word:
    word: str
    start: float | None  # seconds from the recording's start; None: no frame timing (module docstring)
    end: float | None


@dataclass
class Transcript:
    source: str
    text: str
    duration_sec: float
    words: list[Word] = field(default_factory=list)
    windows: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, text) per window

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "text": self.text,
            "duration_sec": round(self.duration_sec, 3),
            "words": [asdict(word) for word in self.words],
            "windows": [{"start": start, "end": end, "text": text} for start, end, text in self.windows],
        }


class Transcriber:
    """A loaded run, its tokenizer, frontend and decoder: waveform in, ``Transcript`` out."""

    def __init__(
        self,
        run: RunModel,
        tokenizer: CTCTokenizer,
        decoder: Decoder,
        window: WindowOptions | None = None,
        frontend: Frontend | None = None,
    ) -> None:
        self.run, self.tokenizer, self.decoder = run, tokenizer, decoder
        self.window = window or WindowOptions()
        self.frontend = frontend or run_frontend(run)
        self.device = next(run.model.parameters()).device

    @torch.inference_mode()
    def transcribe(self, waveform: np.ndarray, source: str = "") -> Transcript:
        """``waveform`` (N,) float32 at ``self.frontend.sample_rate``."""
        rate = self.frontend.sample_rate
        transcript = Transcript(source, "", len(waveform) / rate)
        for start, stop in split_windows(waveform, rate, self.window):
            features = self.frontend(waveform[start:stop])  # (T, F)
            offset, end = start / rate, stop / rate
            if features.shape[0] == 0:
                continue
            inputs = torch.from_numpy(np.ascontiguousarray(features))[None].to(self.device)  # (1, T, F)
            log_probs, lengths = self.run.model(inputs, torch.tensor([features.shape[0]], device=self.device))
            log_probs, lengths = log_probs.float().cpu(), lengths.cpu()  # (1, T', V), (1,)
            best = self.decoder.decode_batch(log_probs, lengths)[0]
            text = best[0].text.strip() if best else ""
            if not text:
                continue
            frame_sec = (stop - start) / rate / max(1, int(lengths[0]))
            words = self._timed_words(text, log_probs, lengths, offset, frame_sec)
            transcript.words.extend(words)
            transcript.windows.append((round(offset, 3), round(end, 3), text))
        transcript.text = " ".join(text for _, _, text in transcript.windows)
        return transcript

    def _timed_words(
        self, text: str, log_probs: torch.Tensor, lengths: torch.Tensor, offset: float, frame_sec: float
    ) -> list[Word]:
        words = text.split()
        spelled = [self.tokenizer.encode(word) for word in words]
        tokens = [token for pieces in spelled for token in pieces]
        if not has_frame_posteriors(self.run.output) or not tokens:
            return [Word(word, None, None) for word in words]
        targets = torch.tensor([tokens], dtype=torch.long)
        paths, aligned, _ = forced_paths(
            log_probs, lengths, targets, torch.tensor([len(tokens)]), self.tokenizer.blank_id
        )
        if not bool(aligned[0]):  # too few frames for the spelling: no frame timing
            return [Word(word, None, None) for word in words]
        spans = token_spans(
            paths[0, : int(lengths[0])], self.tokenizer.blank_id
        )  # one (first, last) per token
        timed, position = [], 0
        for word, pieces in zip(words, spelled, strict=True):
            if not pieces:
                timed.append(Word(word, None, None))
                continue
            first, last = spans[position][0], spans[position + len(pieces) - 1][1]
            position += len(pieces)
            timed.append(
                Word(word, round(offset + first * frame_sec, 3), round(offset + (last + 1) * frame_sec, 3))
            )
        return timed


def token_spans(path: torch.Tensor, blank: int) -> list[tuple[int, int]]:
    """(first, last) frame of each token of a CTC path (T',) in order; a token repeated in the reference is
    two runs with a blank between, so every run of one id is one token."""
    spans: list[tuple[int, int]] = []
    previous = blank
    for frame, label in enumerate(path.tolist()):
        if label != blank:
            if label != previous:
                spans.append((frame, frame))
            else:
                spans[-1] = (spans[-1][0], frame)
        previous = label
    return spans


def run_frontend(run: RunModel) -> Frontend:
    """The frontend the run's features came from: its architecture's, at the width it trained on."""
    width = int(run.training_config.get("data", {}).get("input_dim") or 0)
    frontend = frontend_named(frontend_of(run.architecture), FbankOptions())
    if frontend.entry.width_is_mel_bins and width and width != frontend.feature_dim:
        frontend = frontend_named(frontend.kind, FbankOptions(num_mel_bins=width))
    if width and width != frontend.feature_dim:
        raise ValueError(
            f"the run trained on {width}-dim features, but the {run.architecture} frontend makes "
            f"{frontend.feature_dim}: it was trained on precomputed features no audio frontend here makes"
        )
    return frontend


# --- inputs ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AudioInput:
    source: str  # what the outputs name it by: the file, or the manifest row's id
    path: str
    location: str  # for a skip: the file, or "manifest:line"


def audio_inputs(paths: Sequence[str | Path], report: SkipReport) -> list[AudioInput]:
    """Audio files, folders of them (every entry with an audio extension, recursively, sorted) and manifests
    (their rows' audio files, in order). A path that does not exist is an error naming it. An empty path (not
    the working folder) and an entry named like audio that is not a regular file (a folder ``x.wav``, a FIFO,
    a device, a broken link) stay inputs: ``load_audio`` refuses them with a reason saying what they are,
    without opening them, and ``transcribe_inputs`` counts it."""
    inputs: list[AudioInput] = []
    for given in paths:
        path = Path(given)
        if str(given) == "":
            inputs.append(AudioInput("", "", '""'))
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in AUDIO_EXTENSIONS)
            if not found:
                raise FileNotFoundError(
                    f"{path}: no audio files ({', '.join(AUDIO_EXTENSIONS)}) in this folder"
                )
            inputs += [AudioInput(str(p), str(p), str(p)) for p in found]
        elif not path.exists():
            raise FileNotFoundError(f"{path} does not exist")
        elif path.suffix.lower() in MANIFEST_SUFFIXES and path.is_file():  # a FIFO is not read
            for record in iter_manifest(path, report):
                if record.audio_path is None:
                    report.skip("no audio file", record.location, "transcribe reads audio files")
                    continue
                inputs.append(AudioInput(record.id, record.audio_path, record.location))
                report.seen -= 1  # the reader counted the row; transcribe_inputs counts it once decoded
        else:
            inputs.append(AudioInput(str(path), str(path), str(path)))
    return inputs


def transcribe_inputs(
    transcriber: Transcriber, inputs: Iterable[AudioInput], report: SkipReport
) -> Iterator[Transcript]:
    """One transcript per readable input, in order; unreadable audio is a counted skip (``report``; a
    strict report raises, naming the file)."""
    for item in inputs:
        report.seen += 1
        try:
            waveform = load_audio(item.path, transcriber.frontend.sample_rate)
        except AudioDecodeError as error:
            report.skip(error.reason, item.location, str(error))
            continue
        if not waveform.any():
            report.skip("silent audio", item.location)
            continue
        report.kept += 1
        yield transcriber.transcribe(waveform, item.source)


# --- output formats ---------------------------------------------------------------------------------------
OUTPUT_FORMATS = ("txt", "jsonl", "srt")
CUE_MAX_SEC, CUE_MAX_CHARS, CUE_MAX_GAP_SEC = 5.0, 84, 1.0  # an SRT cue: two lines of 42 characters


def format_txt(transcript: Transcript, with_source: bool) -> str:
    return f"{transcript.source}\t{transcript.text}\n" if with_source else transcript.text + "\n"


def format_jsonl(transcript: Transcript) -> str:
    return json.dumps(transcript.to_dict(), ensure_ascii=False) + "\n"


def srt_cues(transcript: Transcript) -> list[tuple[float, float, str]]:
    """Subtitle cues: timed words grouped while a cue stays under 5 s, 84 characters and 1 s of silence;
    words without times (a Paraformer run) give one cue per window."""
    if not transcript.words or any(word.start is None for word in transcript.words):
        return list(transcript.windows)
    cues: list[tuple[float, float, str]] = []
    current: list[Word] = []
    for word in transcript.words:
        if current:
            text = " ".join(w.word for w in [*current, word])
            if (
                word.end - current[0].start > CUE_MAX_SEC
                or len(text) > CUE_MAX_CHARS
                or word.start - current[-1].end > CUE_MAX_GAP_SEC
            ):
                cues.append((current[0].start, current[-1].end, " ".join(w.word for w in current)))
                current = []
        current.append(word)
    if current:
        cues.append((current[0].start, current[-1].end, " ".join(w.word for w in current)))
    return cues


def format_srt(transcript: Transcript) -> str:
    blocks = [
        f"{number}\n{_srt_time(start)} --> {_srt_time(end)}\n{text}\n"
        for number, (start, end, text) in enumerate(srt_cues(transcript), start=1)
    ]
    return "\n".join(blocks)


def _srt_time(seconds: float) -> str:
    millis = round(seconds * 1000)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d},{millis:03d}"


__all__ = [
    "OUTPUT_FORMATS",
    "AudioInput",
    "Transcriber",
    "Transcript",
    "WindowOptions",
    "Word",
    "audio_inputs",
    "format_jsonl",
    "format_srt",
    "format_txt",
    "run_frontend",
    "split_windows",
    "srt_cues",
    "token_spans",
    "transcribe_inputs",
]
