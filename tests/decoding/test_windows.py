"""decoding.windows: long recordings cut into windows that cover the audio once, in order, none longer than
``window_sec``; silence cuts land in the quietest frame before each limit; options are checked."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from asr_pipeline.decoding.windows import SILENCE_FRAME_SEC, WindowOptions, split_windows

RATE = 1000  # 1 kHz keeps the arithmetic readable: 1 s = 1000 samples, a silence frame = 20 samples


def covers_once(windows, total):
    return (
        windows[0][0] == 0
        and windows[-1][1] == total
        and all(a[1] == b[0] for a, b in itertools.pairwise(windows))
    )


def test_audio_shorter_than_a_window_is_one_window_and_empty_audio_none():
    assert split_windows(np.ones(1500, np.float32), RATE, WindowOptions(window_sec=2)) == [(0, 1500)]
    assert split_windows(np.zeros(0, np.float32), RATE, WindowOptions(window_sec=2)) == []


def test_fixed_windows_cut_every_window_sec_and_the_last_takes_the_rest():
    # 4,500 samples in 2,000-sample windows: 2,000 + 2,000 + 500
    windows = split_windows(np.ones(4500, np.float32), RATE, WindowOptions(window_sec=2, split="fixed"))

    assert windows == [(0, 2000), (2000, 4000), (4000, 4500)]


def test_a_silence_cut_falls_in_the_middle_of_the_quietest_frame_before_the_limit():
    audio = np.ones(5000, np.float32)
    audio[1400:1420] = 0.0  # one quiet 20 ms frame, 0.6 s before the 2 s limit, inside the 1 s search
    windows = split_windows(audio, RATE, WindowOptions(window_sec=2, split="silence", search_sec=1.0))

    # search starts at 2000 - 1000 = 1000; the quiet frame is frame 20 of it: 1000 + 20 * 20 + 10 = 1410
    assert windows[0] == (0, 1410)
    assert covers_once(windows, 5000)
    assert all(stop - start <= 2000 for start, stop in windows)


def test_the_search_is_at_most_half_a_window():
    audio = np.ones(3000, np.float32)
    audio[200:220] = 0.0  # quiet, but 1.8 s before the limit: outside a search capped at 1 s of a 2 s window
    windows = split_windows(audio, RATE, WindowOptions(window_sec=2, split="silence", search_sec=1.8))

    assert 1000 <= windows[0][1] <= 2000
    assert covers_once(windows, 3000)


def test_a_search_shorter_than_one_silence_frame_cuts_at_the_limit():
    search_sec = SILENCE_FRAME_SEC / 2
    windows = split_windows(
        np.ones(3000, np.float32), RATE, WindowOptions(window_sec=1, search_sec=search_sec)
    )

    assert windows == [(0, 1000), (1000, 2000), (2000, 3000)]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"window_sec": 0}, "window_sec must be > 0, got 0"),
        ({"split": "energy"}, "split must be fixed or silence, got 'energy'"),
        ({"search_sec": -1}, "search_sec must be >= 0, got -1"),
    ],
)
def test_bad_options_are_refused_naming_the_field(values, message):
    with pytest.raises(ValueError, match=message):
        WindowOptions(**values)


def test_options_read_from_a_dict_keep_the_defaults_they_do_not_name():
    assert WindowOptions.from_dict({"window_sec": 5}) == WindowOptions(window_sec=5.0)
    assert WindowOptions.from_dict(None) == WindowOptions()
