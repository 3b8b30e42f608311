"""A live terminal view for long commands (`--tui`): a table of named values above the latest events.

One small class serves every command that has a ``--tui`` flag (extract-features, train): the command
calls ``update(name=value, ...)`` whenever a value changes and ``log(line)`` for each event worth seeing
(a decoded record, a skipped sample, a validation result). Rendering is rich's ``Live`` at a few frames
per second, so updating from a hot loop costs a dict write, not a redraw.

Without a terminal (CI, a pipe, ``dvc repro`` logs) rich's Live prints nothing until the view closes;
``LiveView`` then prints the final table once, so the log still shows where the run ended.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text


class LiveView:
    """``with LiveView("extract-features") as view: view.update(records=12); view.log("utt-1: 3.2 s")``."""

    def __init__(
        self,
        title: str,
        *,
        log_lines: int = 8,
        console: Console | None = None,
        refresh_per_second: float = 4.0,
    ) -> None:
        self.title = title
        self.values: dict[str, Any] = {}
        self.events: deque[str] = deque(maxlen=log_lines)
        self.console = console or Console(stderr=True)
        self._live = Live(
            get_renderable=self.render,
            console=self.console,
            refresh_per_second=refresh_per_second,
            transient=False,
            auto_refresh=self.console.is_terminal,
        )

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self._live.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.console.is_terminal:
            self._live.stop()  # draws the final frame
        else:
            self.console.print(self.render())

    def update(self, **values: Any) -> None:
        """Set (or add) named values; the table keeps the order in which names first appeared."""
        self.values.update(values)

    def log(self, line: str) -> None:
        """Append one event line; only the newest ``log_lines`` are shown."""
        self.events.append(line)

    def render(self) -> Group:
        table = Table(title=self.title, show_header=False, expand=False)
        table.add_column("name", style="bold")
        table.add_column("value")
        for name, value in self.values.items():
            table.add_row(name.replace("_", " "), _format(value))
        events = Text("\n".join(self.events) if self.events else "(no events yet)", style="dim")
        return Group(table, events)


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


__all__ = ["LiveView"]
