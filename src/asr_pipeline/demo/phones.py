"""Phone alignments of espeak-ng speech, from the synthesizer itself.

libespeak-ng reports a phoneme event, with the sample where its audio starts, for every phoneme it speaks
(``espeakINITIALIZE_PHONEME_EVENTS``). Synthesizing an utterance again through the library with the voice,
rate and pitch the demo corpus used gives the same samples as the ``espeak-ng --stdout`` file, up to the
library's last buffer (the command line's file goes on with the final pause's tail), so the events are the
file's exact phone boundaries: no forced aligner, no acoustic model; its word events say where each word starts.
``PhoneAlignment.audio`` carries the library's samples, so a caller can check them against the file before
trusting the boundaries. Phone names are espeak-ng's ASCII mnemonics (``D``, ``@2``, ``aU``...); ``_`` and ``_:``
are pauses.

The library keeps one global synthesizer per process, and its synthesis carries state from one utterance
to the next (seen here: a second ``align`` of the same text in one process comes out a few samples longer,
and re-initializing does not reset it); only a process's first synthesis reproduces the command line's file.
``align_utterances`` therefore aligns each utterance in a fresh process (a pool with one task per child).
"""

from __future__ import annotations

import ctypes
import multiprocessing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from asr_pipeline.demo.synthesis import SAMPLE_RATE, Voice

LIBRARY = "libespeak-ng.so.1"
PAUSES = frozenset({"_", "_:", "_!", "_^", "||", "|"})  # espeak-ng's pause and boundary mnemonics

_AUDIO_OUTPUT_RETRIEVAL = 1  # samples handed to the callback, nothing played
_INITIALIZE_PHONEME_EVENTS = 0x0001
_EVENT_LIST_TERMINATED, _EVENT_WORD, _EVENT_PHONEME = 0, 1, 7
_RATE, _PITCH = 1, 3  # espeak_PARAMETER
_POS_CHARACTER, _CHARS_UTF8 = 1, 1


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):  # espeak_EVENT (speak_lib.h)
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),  # ms
        ("sample", ctypes.c_int),  # samples since the start of the text
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


class _VoiceSpec(ctypes.Structure):  # espeak_VOICE (speak_lib.h)
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("languages", ctypes.c_char_p),
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    ]


_Callback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


@dataclass(frozen=True)
class PhoneSegment:
    phone: str
    start: int  # first sample (22,050 Hz)
    end: int  # one past the last sample

    @property
    def is_pause(self) -> bool:
        return self.phone in PAUSES


@dataclass(frozen=True)
class PhoneAlignment:
    audio: np.ndarray  # (samples,) int16: the library's samples, a prefix of the command line's file
    segments: tuple[PhoneSegment, ...]
    sample_rate: int = SAMPLE_RATE
    word_events: tuple[int, ...] = ()  # the sample of each of espeak-ng's word events, in order

    @property
    def samples(self) -> int:
        return len(self.audio)

    def word_starts(self) -> list[int]:
        """The sample where each spoken word starts: the onset of the first phone at or after its word event (the
        library reports a word up to ~50 ms before its first phone, inside the previous word's last one)."""
        onsets = [segment.start for segment in self.segments if not segment.is_pause]
        starts: list[int] = []
        for event in self.word_events:
            following = next((onset for onset in onsets if onset >= event), None)
            if following is not None and (not starts or following > starts[-1]):
                starts.append(following)
        return starts

    def matches(self, audio: np.ndarray) -> bool:
        """Whether ``audio`` (int16, the file's samples) starts with exactly this synthesis."""
        return len(audio) >= self.samples and np.array_equal(audio[: self.samples], self.audio)


class EspeakPhones:
    """The phone segments espeak-ng speaks for a text in a voice (one instance per process)."""

    def __init__(self, library: str = LIBRARY) -> None:
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as error:
            raise RuntimeError(
                f"cannot load {library}: phone alignments come from espeak-ng's library (Debian/Ubuntu: "
                "apt-get install libespeak-ng1, which espeak-ng installs)"
            ) from error
        rate = self._lib.espeak_Initialize(_AUDIO_OUTPUT_RETRIEVAL, 0, None, _INITIALIZE_PHONEME_EVENTS)
        if rate != SAMPLE_RATE:
            raise RuntimeError(
                f"{library} initialised at {rate} Hz, expected {SAMPLE_RATE} (espeak-ng's rate)"
            )
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[int, str]] = []
        self._words: list[int] = []
        self._callback = _Callback(self._receive)  # kept referenced: the library calls it later
        self._lib.espeak_SetSynthCallback(self._callback)

    def _receive(self, wav, count: int, events) -> int:
        if count > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            event = events[i]
            if event.type == _EVENT_PHONEME:
                name = bytes(event.id.string).split(b"\0")[0].decode("utf-8", "replace")
                self._events.append((event.sample, name))
            elif event.type == _EVENT_WORD:
                self._words.append(event.sample)
            i += 1
        return 0  # go on

    def align(self, text: str, voice: Voice) -> PhoneAlignment:
        """Synthesize ``text`` in ``voice`` and return its sample count and phone segments."""
        name = voice.espeak_name.encode()
        # As the command line's -v: a voice file's name first, else a language (en-gb is the file "en"),
        # a "+variant" suffix included.
        if self._lib.espeak_SetVoiceByName(name) != 0:
            spec = _VoiceSpec(languages=name)
            if self._lib.espeak_SetVoiceByProperties(ctypes.byref(spec)) != 0:
                raise ValueError(f"espeak-ng has no voice {voice.espeak_name!r}")
        self._lib.espeak_SetParameter(_RATE, voice.rate_wpm, 0)
        self._lib.espeak_SetParameter(_PITCH, voice.pitch, 0)
        self._chunks, self._events, self._words = [], [], []
        encoded = text.encode("utf-8")
        status = self._lib.espeak_Synth(
            encoded, len(encoded) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
        )
        if status != 0:
            raise RuntimeError(f"espeak_Synth failed with status {status} for {text!r}")
        self._lib.espeak_Synchronize()
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=np.int16)
        segments = segments_from_onsets(self._events, len(audio))
        return PhoneAlignment(audio, segments, word_events=tuple(self._words))


def align_utterances(requests: Sequence[tuple[str, Voice]], jobs: int = 1) -> Iterator[PhoneAlignment]:
    """``EspeakPhones().align(text, voice)`` for each request, in order, each in a fresh process."""
    context = multiprocessing.get_context("forkserver")
    with context.Pool(max(1, jobs), maxtasksperchild=1) as pool:
        yield from pool.imap(_align_one, requests, chunksize=1)


def _align_one(request: tuple[str, Voice]) -> PhoneAlignment:
    return EspeakPhones().align(*request)


def segments_from_onsets(onsets: list[tuple[int, str]], total: int) -> tuple[PhoneSegment, ...]:
    """Each phone lasts from its onset to the next phone's (the last one to ``total``); phones that start
    where the next one does (zero length) are dropped."""
    segments = []
    for (start, phone), (end, _) in zip(onsets, [*onsets[1:], (total, "")], strict=True):
        if end > start:
            segments.append(PhoneSegment(phone, start, end))
    return tuple(segments)


__all__ = [
    "LIBRARY",
    "PAUSES",
    "EspeakPhones",
    "PhoneAlignment",
    "PhoneSegment",
    "align_utterances",
    "segments_from_onsets",
]
