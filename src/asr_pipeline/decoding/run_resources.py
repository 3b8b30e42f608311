"""The lexicon and KenLMs a trained run decodes with, found the way its tokenizer is (``run_layout.run_tokenizer``),
so that ``asr-pipeline decode --run-dir R --input X`` needs no ``--lexicon``/``--lm``.

Each of ``lexicon``, ``word_lm`` and ``token_lm`` is taken from the first of:

1. the run dir's own copy (``LEXICON_FILE``; ``asr-pipeline train`` copies the lexicon in, as it does the
   tokenizer);
2. the paths recorded at training in ``DECODING_FILE`` (``asr-pipeline train``: ``--val-lexicon``,
   ``--val-lm-path``, or the ``lexicon.txt`` beside ``--tokenizer``, the tokenizer stage's layout);
3. for a run inside a Kedro project (the ``train`` stage's ``data/07_train/run``) trained with that project's
   tokenizer (the same bytes as the catalog's ``tokenizer_model``: a lexicon or piece LM spelled in another
   tokenizer's pieces would decode garbage), the project's catalog entries ``lexicon_file``,
   ``word_lm_file`` and ``token_lm_file`` (conf/base/catalog.yml with the paths of conf/base/globals.yml):
   the tokenizer and ``lm`` stages' outputs, as the ``evaluate`` stage reads them.

A file that does not exist (yet: the ``lm`` stage not run) is not found; a decoder that needs a missing lexicon
is the caller's to refuse or replace (``default_decoder``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from asr_pipeline.decoding.decoders import DecodingResources
from asr_pipeline.run_layout import run_tokenizer

LEXICON_FILE = "lexicon.txt"  # the lexicon decoder's word list, copied into the run dir at training
DECODING_FILE = "decoding_resources.json"  # {"lexicon", "word_lm", "token_lm"}: absolute paths or null
# The catalog entries (conf/base/catalog.yml) that name each resource, read by path by the evaluate stage.
CATALOG_ENTRIES = {"lexicon": "lexicon_file", "word_lm": "word_lm_file", "token_lm": "token_lm_file"}
RESOURCES = tuple(CATALOG_ENTRIES)
TOKENIZER_ENTRY = "tokenizer_model"


def training_decoding_files(
    tokenizer: str | Path | None,
    lexicon: str | Path | None = None,
    lm: str | Path | None = None,
    lm_kind: str | None = None,
) -> dict[str, bytes]:
    """The files ``asr-pipeline train`` writes into the run dir beside the tokenizer (name -> bytes): the lexicon
    (``lexicon``, else the ``lexicon.txt`` beside ``tokenizer``) as ``LEXICON_FILE``, and ``DECODING_FILE``
    recording where the lexicon and ``lm`` (a ``lm_kind`` "word" or "token" KenLM) were. Empty when none is known."""
    if lexicon is None and tokenizer is not None and (Path(tokenizer).parent / LEXICON_FILE).is_file():
        lexicon = Path(tokenizer).parent / LEXICON_FILE
    recorded: dict[str, str | None] = dict.fromkeys(RESOURCES)
    if lexicon is not None and Path(lexicon).is_file():
        recorded["lexicon"] = str(Path(lexicon).resolve())
    if lm is not None and lm_kind in ("word", "token") and Path(lm).is_file():
        recorded[f"{lm_kind}_lm"] = str(Path(lm).resolve())
    if not any(recorded.values()):
        return {}
    files = {DECODING_FILE: (json.dumps(recorded, indent=2) + "\n").encode()}
    if recorded["lexicon"] is not None:
        files[LEXICON_FILE] = Path(recorded["lexicon"]).read_bytes()
    return files


def run_decoding_resources(run_dir: str | Path) -> tuple[DecodingResources, dict[str, str]]:
    """The run's resources (module docstring) and, for each one found, where it came from: "run dir",
    "recorded at training" or "project catalog"."""
    run_dir = Path(run_dir)
    found: dict[str, Path] = {}
    origin: dict[str, str] = {}
    candidates = (
        ("run dir", {"lexicon": run_dir / LEXICON_FILE}),
        ("recorded at training", _recorded(run_dir)),
        ("project catalog", _project_catalog(run_dir)),
    )
    for where, paths in candidates:
        for name, path in paths.items():
            if name not in found and path is not None and Path(path).is_file():
                found[name], origin[name] = Path(path), where
    return DecodingResources(**found), origin


def default_decoder(resources: DecodingResources) -> tuple[str, str | None]:
    """The decoder ``decode`` uses when none is asked for, and a note when it is not the lexicon search: that
    needs a lexicon, so a run without one decodes with the lexicon-free search (its piece LM when it has one)."""
    if resources.lexicon is not None:
        return "lexicon", None
    lm = "with its piece LM" if resources.token_lm is not None else "without an LM"
    return (
        "lexicon_free",
        f"the run has no lexicon (--lexicon): decoding lexicon_free {lm} instead of lexicon",
    )


def _recorded(run_dir: Path) -> dict[str, str | None]:
    path = run_dir / DECODING_FILE
    if not path.is_file():
        return {}
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # unreadable: the other sources still apply
    return {name: recorded.get(name) for name in RESOURCES} if isinstance(recorded, Mapping) else {}


def _project_catalog(run_dir: Path) -> dict[str, Path]:
    """The catalog's resource paths of the Kedro project holding ``run_dir`` (none outside a project)."""
    for root in run_dir.resolve().parents:
        catalog, globals_ = root / "conf" / "base" / "catalog.yml", root / "conf" / "base" / "globals.yml"
        if catalog.is_file() and globals_.is_file():
            break
    else:
        return {}
    try:
        entries = yaml.safe_load(catalog.read_text(encoding="utf-8")) or {}
        paths = (yaml.safe_load(globals_.read_text(encoding="utf-8")) or {}).get("paths", {})
    except (OSError, yaml.YAMLError):
        return {}
    found = {}
    for name, entry in {**CATALOG_ENTRIES, "tokenizer": TOKENIZER_ENTRY}.items():
        filepath = (entries.get(entry) or {}).get("filepath")
        if isinstance(filepath, str):
            resolved = re.sub(
                r"\$\{globals:paths\.(\w+)\}", lambda m: str(paths.get(m.group(1), m.group(0))), filepath
            )
            if "${" not in resolved:
                found[name] = root / resolved
    if not _same_file_bytes(found.pop("tokenizer", None), _run_tokenizer(run_dir)):
        return {}  # another tokenizer's run: the project's lexicon and piece LM do not spell its pieces
    return found


def _run_tokenizer(run_dir: Path) -> Path | None:
    try:
        return run_tokenizer(run_dir)
    except (FileNotFoundError, ValueError):
        return None


def _same_file_bytes(first: Path | None, second: Path | None) -> bool:
    if first is None or second is None or not first.is_file() or not second.is_file():
        return False
    return first.stat().st_size == second.stat().st_size and first.read_bytes() == second.read_bytes()


__all__ = [
    "DECODING_FILE",
    "LEXICON_FILE",
    "default_decoder",
    "run_decoding_resources",
    "training_decoding_files",
]
