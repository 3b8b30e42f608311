"""tui: a table of named values in first-seen order above the newest events; without a terminal the final
table is printed once when the view closes."""

from __future__ import annotations

import io

from rich.console import Console

from asr_pipeline.tui import LiveView


def piped() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=80), out


def test_without_a_terminal_the_final_table_and_events_print_once_on_close():
    console, out = piped()
    with LiveView("extract-features", console=console, log_lines=2) as view:
        view.update(records_done=12, seconds=3.14159)
        view.update(skipped=1, records_done=13)  # an update keeps the name's first place
        for line in ("utt-1: 3.2 s", "utt-2: 1.0 s", "utt-3: 2.5 s"):
            view.log(line)
        assert out.getvalue() == ""  # nothing drawn while it runs

    text = out.getvalue()
    assert text.count("extract-features") == 1
    assert text.index("records done") < text.index("seconds") < text.index("skipped")
    assert "13" in text and "3.142" in text and "3.14159" not in text  # floats to 4 significant digits
    assert "utt-1" not in text and "utt-2: 1.0 s" in text and "utt-3: 2.5 s" in text  # the newest 2 only


def test_a_view_with_no_events_says_so():
    console, out = piped()
    with LiveView("train", console=console):
        pass

    assert "(no events yet)" in out.getvalue()
