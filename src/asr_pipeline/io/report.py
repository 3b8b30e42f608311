"""Counted skips: bad input is either rejected with a clear message or skipped and counted here."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


class InputError(ValueError):
    """Bad input in strict mode: the message names the file, the line or row, and what was wrong."""


@dataclass
class SkipReport:
    """Per-reason counts of skipped records, with the first few locations of each reason."""

    strict: bool = False
    max_examples: int = 5
    seen: int = 0
    kept: int = 0
    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, location: str, detail: str = "") -> None:
        """Record one skipped record; in strict mode raise instead."""
        message = f"{location}: {reason}" + (f" ({detail})" if detail else "")
        if self.strict:
            raise InputError(message + ". Fix the record or run in lenient mode to skip and count it.")
        self.counts[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < self.max_examples:
            shown.append(message)

    @property
    def skipped(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict:
        return {
            "seen": self.seen,
            "kept": self.kept,
            "skipped": self.skipped,
            "skipped_by_reason": dict(sorted(self.counts.items())),
            "first_skipped": {reason: self.examples[reason] for reason in sorted(self.examples)},
        }
