"""The code each DVC stage runs, derived from the import graph, so that no code change can leave a stale cache.

A stage runs ``kedro run --pipelines=<stage>``: Kedro's project files (``settings.py`` and what it imports,
``pipeline_registry.py``, ``conf/base/catalog.yml``), the stage's pipeline package and every project module
those import, directly or not, including imports inside functions (read statically from the source, so a
lazy import counts as much as a top-level one). The train stage also runs ``asr_pipeline.training.worker``
under torchrun. Package ``__init__.py`` files on the way count too: importing a module runs them.

    python -m asr_pipeline.stage_deps            # print each stage's code deps
    python -m asr_pipeline.stage_deps --check    # exit 1 if a fingerprint or dvc.yaml is out of date
    python -m asr_pipeline.stage_deps --write    # rewrite them

The lists do not live in ``dvc.yaml`` (a person reads it): each stage's goes to its fingerprint file,
``conf/stage_code/<stage>.sha256``, whose first line hashes every listed file's path and content, with the
sorted list below it for a reviewer. ``dvc.yaml`` depends on that one file, under each stage's ``# code:``
comment, so an edit to any module a stage runs changes the stage's fingerprint and DVC reruns it and what
depends on it, once the fingerprints are rewritten: ``make demo``/``make repro`` run ``--write`` before
``dvc repro``, and ``tests/test_stage_deps.py`` fails while a fingerprint is stale. (DVC's templating cannot
splice a list into ``deps:``: "Cannot interpolate data of type 'list'", DVC 3.67, hence a file, not ``vars:``.)
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = {"asr_pipeline": PROJECT_ROOT / "src", "asr_kernels": PROJECT_ROOT / "kernels"}
# What `kedro run` itself loads for any stage.
KEDRO_ENTRY_MODULES = ("asr_pipeline.settings", "asr_pipeline.pipeline_registry")
KEDRO_FILES = ("conf/base/catalog.yml",)
STAGE_ENTRY_MODULES: dict[str, tuple[str, ...]] = {
    "demo_corpus": ("asr_pipeline.pipelines.demo_corpus",),
    "transcripts": ("asr_pipeline.pipelines.transcripts",),
    "tokenizer": ("asr_pipeline.pipelines.tokenizer",),
    "features": ("asr_pipeline.pipelines.features",),
    "conditions": ("asr_pipeline.pipelines.conditions",),
    "index": ("asr_pipeline.pipelines.index",),
    "lm": ("asr_pipeline.pipelines.lm",),
    # torchrun runs the worker in fresh processes: its imports are the train stage's too.
    "train": ("asr_pipeline.pipelines.train", "asr_pipeline.training.worker"),
    "tune_decoding": ("asr_pipeline.pipelines.tune_decoding",),
    "evaluate": ("asr_pipeline.pipelines.evaluate",),
    # The alignment recipe's iterations (foreach over alignment.iterations); train_ce trains through torchrun.
    "align": ("asr_pipeline.pipelines.alignment_align",),
    "train_ce": ("asr_pipeline.pipelines.alignment_train", "asr_pipeline.training.worker"),
    # HuBERT pretraining's iterations (foreach over hubert.iterations); hubert_pretrain trains through torchrun.
    "hubert_units": ("asr_pipeline.pipelines.hubert_units",),
    "hubert_pretrain": ("asr_pipeline.pipelines.hubert_pretrain", "asr_pipeline.training.worker"),
    "hubert_validate": ("asr_pipeline.pipelines.hubert_validate",),
    "hubert_abx": ("asr_pipeline.pipelines.hubert_abx",),
    "pron_corpus": ("asr_pipeline.pipelines.pron_corpus",),
    "pron_phones": ("asr_pipeline.pipelines.pron_phones",),
    "pron_aligner": ("asr_pipeline.pipelines.pron_aligner", "asr_pipeline.training.worker"),
    # Fine-tuning runs (foreach over finetune.runs), trained through torchrun.
    "finetune": ("asr_pipeline.pipelines.finetune", "asr_pipeline.training.worker"),
    # Pretrained Whisper / Voxtral fine-tuning (foreach over hf_finetune.runs), trained in the node's process.
    "hf_finetune": ("asr_pipeline.pipelines.hf_finetune",),
}
# A module named in a string, with an optional ``:attribute``: what importlib imports later.
LAZY_IMPORT_PATH = re.compile(r"(?P<module>(?:asr_pipeline|asr_kernels)(?:\.\w+)*)(?::\w+)?")
FINGERPRINT_DIR = "conf/stage_code"
MARKER = "# code:"
MARKER_LINE = (
    f"{MARKER} its fingerprint, `python -m asr_pipeline.stage_deps --write` (tests/test_stage_deps.py)"
)


@cache
def module_file(module: str) -> Path | None:
    """The source file of a project module (a package's ``__init__.py``), or None if it is not ours."""
    top = module.split(".")[0]
    if top not in SOURCE_ROOTS:
        return None
    base = SOURCE_ROOTS[top].joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(path: Path, module: str) -> Iterable[str]:
    """Every module name an import statement in ``path`` may refer to (``from a import b`` gives a and a.b), and
    every lazy import path written as a string (``"asr_pipeline.models.zipformer"``,
    ``"asr_pipeline.models.zipformer:build_zipformer"``): an architecture spec names its model that way."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            lazy = LAZY_IMPORT_PATH.fullmatch(node.value)
            if lazy:
                yield lazy.group("module")
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, up level - 1 more
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, node.module] if node.module else parts)
            else:
                base = node.module or ""
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


@cache
def closure(entry_modules: tuple[str, ...]) -> frozenset[Path]:
    """The source files of ``entry_modules`` and of every project module they import, transitively."""
    seen: set[str] = set()
    files: set[Path] = set()
    pending = [name for module in entry_modules for name in _with_parents(module)]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        path = module_file(module)
        if path is None:
            continue
        files.add(path)
        pending.extend(_project_imports(module))
    return frozenset(files)


@cache
def _project_imports(module: str) -> tuple[str, ...]:
    """The project modules (with their parent packages) that ``module``'s file may import: each file is
    parsed once, whatever the stages that share it."""
    path = module_file(module)
    assert path is not None
    names = (name for name in _imported_names(path, module) if module_file(name) is not None)
    return tuple(dict.fromkeys(parent for name in names for parent in _with_parents(name)))


def clear_caches() -> None:
    """Forget every file read and import followed: for a caller that points ``SOURCE_ROOTS`` elsewhere."""
    for cached in (closure, module_file, _project_imports):
        cached.cache_clear()


def stage_code_deps(stage: str) -> list[str]:
    """Project-relative paths of the code ``stage`` runs, sorted."""
    files = closure(KEDRO_ENTRY_MODULES + STAGE_ENTRY_MODULES[stage])
    paths = {str(path.relative_to(PROJECT_ROOT)) for path in files} | set(KEDRO_FILES)
    return sorted(paths)


def fingerprint_path(stage: str) -> str:
    """The project-relative path of ``stage``'s fingerprint file, the one code dep dvc.yaml names."""
    return f"{FINGERPRINT_DIR}/{stage}.sha256"


def fingerprint(stage: str) -> str:
    """``stage``'s fingerprint file: a SHA-256 over each code file's path and content, then the sorted paths.

    The path enters the hash with the content's own digest, so a rename or a moved file counts as a change."""
    paths = stage_code_deps(stage)
    digest = hashlib.sha256()
    for path in paths:
        content = hashlib.sha256((PROJECT_ROOT / path).read_bytes()).hexdigest()
        digest.update(f"{path}\0{content}\n".encode())
    return "".join([f"{digest.hexdigest()}\n", *(f"{path}\n" for path in paths)])


def stale_fingerprints() -> list[str]:
    """The stages whose fingerprint file is missing or differs from the code they run now."""
    stale = []
    for stage in STAGE_ENTRY_MODULES:
        path = PROJECT_ROOT / fingerprint_path(stage)
        if not path.is_file() or path.read_text() != fingerprint(stage):
            stale.append(stage)
    return stale


def write_fingerprints() -> None:
    """Rewrite every stage's fingerprint file (an unchanged one keeps its bytes and mtime)."""
    (PROJECT_ROOT / FINGERPRINT_DIR).mkdir(parents=True, exist_ok=True)
    for stage in stale_fingerprints():
        (PROJECT_ROOT / fingerprint_path(stage)).write_text(fingerprint(stage))


def _stage_of(line: str, current: str | None) -> str | None:
    """The stage a dvc.yaml line opens (``  <name>:`` at stage indentation), else ``current``."""
    stripped = line.rstrip()
    if line.startswith("  ") and not line.startswith("   ") and stripped.endswith(":"):
        name = stripped.strip()[:-1]
        return name if name in STAGE_ENTRY_MODULES else None
    return current


def render(dvc_yaml: str) -> str:
    """``dvc_yaml`` with the entry below every stage's ``# code:`` line naming the stage's fingerprint file."""
    lines = dvc_yaml.splitlines(keepends=True)
    out: list[str] = []
    stage: str | None = None
    found: set[str] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        stage = _stage_of(line, stage)
        if stage and line.strip().startswith(MARKER):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}{MARKER_LINE}\n")
            out.append(f"{indent}- {fingerprint_path(stage)}\n")
            found.add(stage)
            i += 1
            while i < len(lines) and lines[i].startswith(f"{indent}- "):
                i += 1
            continue
        out.append(line)
        i += 1
    missing = set(STAGE_ENTRY_MODULES) - found
    if missing:
        raise ValueError(f"dvc.yaml stages without a '{MARKER}' line in their deps: {sorted(missing)}")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="exit 1 if a fingerprint or dvc.yaml is out of date"
    )
    mode.add_argument(
        "--write", action="store_true", help="rewrite the fingerprints and dvc.yaml's code deps"
    )
    parser.add_argument("--dvc-yaml", default=str(PROJECT_ROOT / "dvc.yaml"))
    args = parser.parse_args(argv)
    path = Path(args.dvc_yaml)
    if not (args.check or args.write):
        for stage in STAGE_ENTRY_MODULES:
            print(f"{stage}:\n" + "".join(f"  {dep}\n" for dep in stage_code_deps(stage)), end="")
        return 0
    current = path.read_text()
    wanted = render(current)
    if args.write:
        write_fingerprints()
        if wanted != current:
            path.write_text(wanted)
        return 0
    stale = [fingerprint_path(stage) for stage in stale_fingerprints()] + (
        [str(path)] if wanted != current else []
    )
    if stale:
        print(
            f"out of date: {', '.join(stale)}; run `python -m asr_pipeline.stage_deps --write`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
