"""Layers only point down (STYLE.md rule 14): decoding/ loads a run's model through models/, never
through training/."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import asr_pipeline.decoding


def test_importing_every_decoding_module_imports_nothing_from_training():
    modules = [
        f"asr_pipeline.decoding.{m.name}" for m in pkgutil.iter_modules(asr_pipeline.decoding.__path__)
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('asr_pipeline.training')))"
    )

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert "asr_pipeline.decoding.evaluation" in modules
    assert result.stdout.strip() == "[]"
