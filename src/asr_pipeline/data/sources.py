"""Which kind of training manifest a path is: feature shards (the fast path) or raw manifests.

Feature shards (``io.shards``) are Parquet files whose schema has every shard column (``id, features,
rows, cols, tokens, duration_ms, text``); only the footer is read to tell. Anything else that
``io.manifests.iter_manifest`` reads -- JSONL/JSON/TSV records, Parquet record tables (e.g. Hugging Face
audio datasets), audio folders with sidecars -- is a raw manifest, featurized on the fly during
training (``data.audio_dataset``).

One split is one kind: the two paths batch, augment and report differently, and a mix is far more
likely a wrong path than an intent, so a mix is refused naming one path of each kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from asr_pipeline.io.shards import SHARD_SCHEMA, list_shards

ManifestKind = Literal["shards", "raw"]


@dataclass(frozen=True)
class ResolvedManifests:
    kind: ManifestKind
    paths: list[str]  # shards: one file each; raw: manifest files or folders as iter_manifest takes them


def is_feature_shard(path: str | Path) -> bool:
    """True for a Parquet file with every feature-shard column (read from the footer only)."""
    path = Path(path)
    if not path.is_file() or path.suffix.lower() != ".parquet":
        return False
    try:
        names = set(pq.read_schema(path).names)
    except (pa.ArrowException, OSError) as error:
        raise ValueError(f"{path}: not a readable Parquet file ({error}); re-export or remove it") from None
    return set(SHARD_SCHEMA.names) <= names


def resolve_manifests(inputs: Sequence[str | Path], what: str = "training manifest") -> ResolvedManifests:
    """Expand ``inputs`` into shard files or raw manifest paths, in order, and say which kind they are.

    A folder holding feature shards (``shard-*.parquet``, else any ``*.parquet`` with the shard schema)
    expands to those shards; any other folder is one raw manifest (its record files, or its audio files
    with sidecars). Raises ValueError for a missing path, an empty folder or a mix of kinds.
    """
    kinds: dict[ManifestKind, list[str]] = {"shards": [], "raw": []}
    for given in inputs:
        path = Path(given)
        if not path.exists():
            raise ValueError(f"{what} {path}: no such file or folder")
        if path.is_dir():
            candidates = list_shards(path) or sorted(path.glob("*.parquet"))
            shards = [p for p in candidates if is_feature_shard(p)]
            if shards and len(shards) != len(candidates):
                other = next(p for p in candidates if p not in shards)
                raise ValueError(
                    f"{what} {path}: holds feature shards and other Parquet files (e.g. {other.name}); "
                    "keep shards in a folder of their own"
                )
            if shards:
                kinds["shards"].extend(str(p) for p in shards)
            elif any(path.iterdir()):
                kinds["raw"].append(str(path))
            else:
                raise ValueError(f"{what} {path}: the folder is empty (no shards, records or audio)")
        else:
            kinds["shards" if is_feature_shard(path) else "raw"].append(str(path))
    if kinds["shards"] and kinds["raw"]:
        raise ValueError(
            f"{what}s mix feature shards ({kinds['shards'][0]}) and raw manifests ({kinds['raw'][0]}); "
            "give one kind per split: extract features for all of it, or train on raw manifests only"
        )
    kind: ManifestKind = "raw" if kinds["raw"] else "shards"
    return ResolvedManifests(kind, kinds[kind])


__all__ = ["ManifestKind", "ResolvedManifests", "is_feature_shard", "resolve_manifests"]
