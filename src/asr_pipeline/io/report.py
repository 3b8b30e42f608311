"""Counted skips: bad input is either rejected with a clear message or skipped and counted here."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


class InputError(ValueError):
    """Bad input in strict mode: the message names the file, the line or row, and what was wrong."""


class NothingKeptError(InputError):
    """Every record was skipped (or there were none): nothing usable to write. The message gives the skips
    by reason and the first location of each, so the one line says what to fix."""


@dataclass
class SkipReport:
    """Per-reason counts of skipped records, with the first few locations of each reason.

    ``notes`` counts kept records that carry something worth knowing (e.g. "unknown pieces": a transcript
    the tokenizer could spell only in part); they are not skips, ``kept + skipped == seen`` still holds.
    """

    strict: bool = False
    max_examples: int = 5
    seen: int = 0
    kept: int = 0
    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: Counter = field(default_factory=Counter)

    def skip(self, reason: str, location: str, detail: str = "") -> None:
        """Record one skipped record; in strict mode raise instead."""
        message = f"{location}: {reason}" + (f" ({detail})" if detail else "")
        if self.strict:
            raise InputError(message + ". Fix the record or run in lenient mode to skip and count it.")
        self.counts[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < self.max_examples:
            shown.append(message)

    def note(self, what: str, count: int = 1) -> None:
        """Count ``count`` kept records with ``what``; ``note(what, 0)`` lists ``what`` even at 0."""
        self.notes[what] += count

    def require_kept(self, what: str) -> None:
        """Raise ``NothingKeptError`` when no record was kept, naming ``what`` was not made and why."""
        if self.kept > 0:
            return
        if self.seen == 0:
            raise NothingKeptError(f"{what}: the input holds no records; nothing was written")
        reasons = ", ".join(f"{reason}: {count}" for reason, count in self.counts.most_common())
        first = "; ".join(shown[0] for shown in self.examples.values() if shown)
        raise NothingKeptError(
            f"{what}: all {self.seen} records were skipped, so nothing was written (skipped by reason: "
            f"{reasons}; first: {first}). Fix these records (or the options that refuse them) and rerun"
        )

    @property
    def skipped(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict:
        summary = {
            "seen": self.seen,
            "kept": self.kept,
            "skipped": self.skipped,
            "skipped_by_reason": dict(sorted(self.counts.items())),
            "first_skipped": {reason: self.examples[reason] for reason in sorted(self.examples)},
        }
        if self.notes:  # count and share of the kept records, per note
            summary["kept_with"] = {
                what: {"count": count, "share": round(count / self.kept, 4) if self.kept else 0.0}
                for what, count in sorted(self.notes.items())
            }
        return summary
