"""The benchmark scripts, imported as the scripts import each other: as top-level modules from benchmarks/."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def imported_script(monkeypatch: pytest.MonkeyPatch, name: str, *neighbours: str) -> Iterator[ModuleType]:
    """For a fixture: ``benchmarks/NAME.py`` as a module, forgotten afterwards with the ``neighbours`` it
    imports, so the next test imports them afresh."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    yield importlib.import_module(name)
    for module in (name, *neighbours):
        sys.modules.pop(module, None)
