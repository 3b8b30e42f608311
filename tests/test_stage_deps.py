"""Every DVC stage depends on all the code it runs: each stage's fingerprint file (conf/stage_code/) is current and
named in dvc.yaml, it changes with any file the stage runs, and the static import closure covers what the stage
really imports at run time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from asr_pipeline.stage_deps import (
    PROJECT_ROOT,
    STAGE_ENTRY_MODULES,
    fingerprint,
    fingerprint_path,
    render,
    stage_code_deps,
    stale_fingerprints,
)


def test_every_stages_fingerprint_file_is_current():
    assert stale_fingerprints() == [], (
        "run `python -m asr_pipeline.stage_deps --write` and commit conf/stage_code"
    )


def test_dvc_yaml_names_each_stages_fingerprint_as_its_code_dep():
    current = (PROJECT_ROOT / "dvc.yaml").read_text()
    stages = yaml.safe_load(current)["stages"]

    assert render(current) == current, "run `python -m asr_pipeline.stage_deps --write` and commit dvc.yaml"
    for stage in STAGE_ENTRY_MODULES:
        deps = stages[stage].get("do", stages[stage])["deps"]
        # its own fingerprint and no other stage's: an edit reruns exactly the stages whose code it is in
        assert [dep for dep in deps if str(dep).startswith("conf/stage_code/")] == [
            fingerprint_path(stage)
        ], stage
        assert not [dep for dep in deps if str(dep).startswith(("src/", "kernels/"))], (
            "no code lists in dvc.yaml"
        )


def test_a_fingerprint_hashes_the_stages_files_and_lists_them_below():
    first, *listed = fingerprint("features").splitlines()

    assert len(first) == 64 and int(first, 16) >= 0
    assert listed == stage_code_deps("features")


def test_editing_one_file_a_stage_runs_changes_its_fingerprint_and_no_unrelated_ones(monkeypatch):
    from asr_pipeline import stage_deps

    path = "src/asr_pipeline/demo/synthesis.py"
    before = {stage: fingerprint(stage) for stage in STAGE_ENTRY_MODULES}
    real_read_bytes = Path.read_bytes
    edited = (PROJECT_ROOT / path).resolve()
    monkeypatch.setattr(
        Path,
        "read_bytes",
        lambda self: real_read_bytes(self) + (b"\n# edited\n" if self.resolve() == edited else b""),
    )
    after = {stage: stage_deps.fingerprint(stage) for stage in STAGE_ENTRY_MODULES}

    changed = {stage for stage in STAGE_ENTRY_MODULES if after[stage] != before[stage]}
    assert changed == {stage for stage in STAGE_ENTRY_MODULES if path in stage_code_deps(stage)}
    assert "demo_corpus" in changed and "train" not in changed


def test_every_stage_depends_on_kedros_own_project_files():
    for stage in STAGE_ENTRY_MODULES:
        deps = stage_code_deps(stage)
        for path in (
            "conf/base/catalog.yml",
            "src/asr_pipeline/settings.py",
            "src/asr_pipeline/config_loader.py",
            "src/asr_pipeline/pipeline_registry.py",
        ):
            assert path in deps, (stage, path)


def test_train_depends_on_what_the_torchrun_worker_imports_beyond_the_node():
    deps = stage_code_deps("train")

    for path in (
        "src/asr_pipeline/text/tokenizer.py",
        "src/asr_pipeline/io/shards.py",
        "src/asr_pipeline/training/worker.py",
        "src/asr_pipeline/models/squeezeformer.py",
        "kernels/asr_kernels/__init__.py",
        "kernels/asr_kernels/glu.py",
    ):
        assert path in deps, path
    assert "src/asr_pipeline/demo/synthesis.py" not in deps, "only what it imports"


def test_an_import_inside_a_function_counts(tmp_path, monkeypatch):
    from asr_pipeline import stage_deps

    package = tmp_path / "src" / "asr_pipeline"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "entry.py").write_text(
        "def f():\n    from ..sub import lazy\n    from . import other\n"
    )
    (package / "sub" / "lazy.py").write_text("")
    (package / "sub" / "other.py").write_text("import asr_pipeline.sub.deep\n")
    (package / "sub" / "deep.py").write_text("")
    monkeypatch.setattr(stage_deps, "SOURCE_ROOTS", {"asr_pipeline": tmp_path / "src"})
    stage_deps.clear_caches()
    try:
        files = {p.name for p in stage_deps.closure(("asr_pipeline.sub.entry",))}
    finally:
        stage_deps.clear_caches()

    assert files == {"__init__.py", "entry.py", "lazy.py", "other.py", "deep.py"}


def test_a_module_named_by_its_lazy_import_path_counts(tmp_path, monkeypatch):
    from asr_pipeline import stage_deps

    package = tmp_path / "src" / "asr_pipeline"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "spec.py").write_text(
        'MODEL = "asr_pipeline.model"\nBUILDER = "asr_pipeline.builder:build"\n'
        '"""a docstring that mentions asr_pipeline.prose in a sentence"""\n'
    )
    for name in ("model", "builder", "prose"):
        (package / f"{name}.py").write_text("")
    monkeypatch.setattr(stage_deps, "SOURCE_ROOTS", {"asr_pipeline": tmp_path / "src"})
    stage_deps.clear_caches()
    try:
        files = {p.name for p in stage_deps.closure(("asr_pipeline.spec",))}
    finally:
        stage_deps.clear_caches()

    assert files == {"__init__.py", "spec.py", "model.py", "builder.py"}


@pytest.mark.parametrize("stage", ["transcripts", "features", "train", "evaluate"])
def test_the_static_deps_cover_every_project_module_the_stage_imports_at_run_time(stage):
    entries = ["asr_pipeline.settings", "asr_pipeline.pipeline_registry", *STAGE_ENTRY_MODULES[stage]]
    script = (
        "import importlib, json, sys\n"
        f"for name in {entries!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m.__file__ for m in list(sys.modules.values()) "
        "if getattr(m, '__file__', None))))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    roots = (PROJECT_ROOT / "src", PROJECT_ROOT / "kernels")
    imported = {
        str(path.relative_to(PROJECT_ROOT))
        for path in map(Path, json.loads(result.stdout.splitlines()[-1]))
        if any(root in path.parents for root in roots)
    }

    assert imported, "the stage imports project modules"
    assert imported <= set(stage_code_deps(stage)), sorted(imported - set(stage_code_deps(stage)))
