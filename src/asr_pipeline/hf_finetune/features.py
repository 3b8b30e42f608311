"""A pretrained model's input features, computed once and cached as Parquet feature shards.

The model's own feature extractor (Whisper's log-mel, which Voxtral shares) turns each utterance into whole
30 s windows (``nb_max_frames`` frames each, zero-padded): one for Whisper, as many as the audio needs for
Voxtral. The shards follow ``io.shards``' contract: ``features`` (T, F) row-major with T a multiple of the
window, ``rows`` T, ``cols`` the mel bins, ``tokens`` empty (the prompt and transcript are tokenized per
batch, since the prompt is a training option), ``duration_ms``, ``text``.

The cache folder's name is a key of everything the features depend on: the feature extractor's settings,
the longest audio taken and the input manifest (every file under it by path, size and modification time).
Training settings are not part of it, so a rerun after a change of learning rate, LoRA rank or language
finds the folder and featurizes nothing. A folder is written as ``<key>.tmp`` and renamed when complete, and
its ``report.json`` says what was kept and skipped.

A condition split (``evaluate`` on ``test_noisy`` etc.): the ``conditions`` stage keeps only our frontend's
features of the degraded audio (fbank or w2v-bert frames), from which no waveform and so no Whisper log-mel
can be recovered; but its degradation is a pure function of (params.yaml ``conditions``, utterance id, audio),
so ``featurize(..., condition=condition_split(name, conditions))`` degrades the test audio the same way and
makes the model's features from that.

Nothing here holds a corpus whole: the manifest is read as a stream (``io.manifests``: Parquet and Arrow in
record batches), the cache written ``rows_per_shard`` utterances at a time, and ``FeatureShards(streaming=True)``
reads it back one shard at a time.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from asr_pipeline.augment.mix import AugmentationMix
from asr_pipeline.features.split import condition_mix
from asr_pipeline.io.audio import AudioDecodeError
from asr_pipeline.io.audio_segment import load_audio_segment
from asr_pipeline.io.manifests import iter_manifest
from asr_pipeline.io.records import ManifestRecord
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import list_shards, read_example, records_to_table, shard_name, write_shard

REPORT_FILE = "report.json"


def manifest_stamp(manifest: str | Path) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime_ns) of the manifest file or of every file under the folder."""
    path = Path(manifest)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [
        (str(p.relative_to(path) if path.is_dir() else p.name), p.stat().st_size, p.stat().st_mtime_ns)
        for p in files
    ]


def cache_key(
    feature_extractor: Any,
    manifest: str | Path,
    max_windows: int | None,
    max_audio_sec: float,
    condition: AugmentationMix | None = None,
) -> str:
    """The name of the cache folder of ``manifest``'s features (module docstring)."""
    settings = feature_extractor.to_dict()
    settings.pop("processor_class", None)  # where it was saved from, not how it computes
    payload = {
        "feature_extractor": settings,
        "max_windows": max_windows,
        "max_audio_sec": max_audio_sec,
        **({"condition": dataclasses.asdict(condition)} if condition is not None else {}),
        "manifest": str(Path(manifest).resolve()),
        "files": manifest_stamp(manifest),
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def window_features(feature_extractor: Any, waveform: np.ndarray) -> np.ndarray:
    """(windows * nb_max_frames, F) log-mel features of a 16 kHz waveform, padded to whole windows."""
    features = feature_extractor(
        waveform,
        sampling_rate=feature_extractor.sampling_rate,
        return_tensors="np",
        padding="longest",
        pad_to_multiple_of=feature_extractor.n_samples,
        truncation=False,
    )["input_features"][0]  # (F, T)
    return np.ascontiguousarray(features.T, dtype=np.float32)  # (T, F)


def _waveform(record: ManifestRecord, sample_rate: int) -> np.ndarray:
    source = record.audio_bytes if record.kind == "audio_bytes" else record.audio_path
    return load_audio_segment(
        source, sample_rate, record.offset_sec, record.duration_sec, name=record.location
    )  # (N,)


def condition_split(name: str, conditions: dict[str, Any] | None) -> AugmentationMix:
    """The evaluation condition ``name`` of params.yaml ``conditions`` (its ``seed`` and ``<name>`` entry), as
    the mix the ``conditions`` stage extracts its ``test_<name>`` split with (``features.split.condition_mix``)."""
    known = sorted(key for key in conditions or {} if key != "seed")
    if name not in known:
        raise ValueError(
            f"evaluation condition {name!r} is not in params.yaml conditions (known: {', '.join(known) or 'none'})"
        )
    return AugmentationMix.from_dict(
        condition_mix(name, conditions[name], int(conditions.get("seed", 0))), f"conditions.{name}"
    )


@dataclass(frozen=True)
class CachedFeatures:
    directory: Path
    report: dict[str, Any]
    reused: bool  # True: found in the cache, nothing was featurized


def featurize(
    manifest: str | Path,
    feature_extractor: Any,
    cache_root: str | Path,
    *,
    max_windows: int | None,
    max_audio_sec: float,
    rows_per_shard: int = 256,
    condition: AugmentationMix | None = None,
) -> CachedFeatures:
    """The cached features of ``manifest`` (any form ``io.manifests.iter_manifest`` reads), computing them
    only when the cache has no folder for them. Records without audio or text, undecodable audio and audio
    longer than ``max_audio_sec`` or ``max_windows`` windows are skipped and counted in the report.

    ``condition``: an evaluation condition's mix (``condition_split``): each utterance's audio is degraded as
    the ``conditions`` stage degrades it, by (seed, utterance id), before the model's features are made."""
    key = cache_key(feature_extractor, manifest, max_windows, max_audio_sec, condition)
    directory = Path(cache_root) / key
    if (directory / REPORT_FILE).is_file():
        return CachedFeatures(directory, json.loads((directory / REPORT_FILE).read_text()), True)
    tmp = directory.with_name(f"{key}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    rate, window_sec = (
        feature_extractor.sampling_rate,
        feature_extractor.n_samples / feature_extractor.sampling_rate,
    )
    longest = min(max_audio_sec, window_sec * max_windows) if max_windows else max_audio_sec
    report, pending, shards = SkipReport(), [], 0
    for record in iter_manifest(manifest, report):  # the readers count report.seen
        if not record.text:
            report.skip("no transcript", record.location)
            continue
        if record.kind not in ("audio_file", "audio_bytes"):
            report.skip("no audio (a pretrained model reads audio, not features)", record.location)
            continue
        try:
            waveform = _waveform(record, rate)
        except AudioDecodeError as error:
            report.skip(error.reason, record.location, str(error))
            continue
        if condition is not None and waveform.any():  # as features.extract.featurize_audio applies it
            waveform = condition.augment(record.id, waveform, rate)[1]
        if len(waveform) > longest * rate:
            report.skip(f"longer than {longest:g} s", record.location, f"{len(waveform) / rate:.1f} s")
            continue
        pending.append({"id": record.id, "features": window_features(feature_extractor, waveform),
                        "tokens": [], "duration_ms": round(1000 * len(waveform) / rate), "text": record.text})  # fmt: skip
        report.kept += 1
        if len(pending) == rows_per_shard:
            write_shard(records_to_table(pending), tmp / shard_name(shards))
            pending, shards = [], shards + 1
    if pending:
        write_shard(records_to_table(pending), tmp / shard_name(shards))
    report.require_kept(f"features of {manifest}")
    summary = {"manifest": str(manifest), "condition": condition and condition.entries[0].name, "kept": report.kept, "seen": report.seen,
               "skipped": dict(report.counts), "first_skipped": report.examples}  # fmt: skip
    (tmp / REPORT_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return CachedFeatures(directory, summary, False)


class FeatureShards:
    """Dataset over a cache folder's shards: item i is {"id", "text", "features" (T, F)}, counted across the
    shards in name order.

    In memory (``streaming`` False), every shard is read once, up front. ``streaming`` holds one shard at a
    time: asking for an item of another shard reads that one and drops the one held, so a corpus larger than
    memory trains in the memory of ``rows_per_shard`` utterances, provided items are asked for shard by shard:
    in index order (validation, scoring) or in ``epoch_order`` (training). Both give the same items in the same
    order; ``peak_rows_held`` counts the most rows held at once.
    """

    def __init__(self, directory: str | Path, streaming: bool = False) -> None:
        self.paths, self.streaming = list_shards(directory), streaming
        sizes = [pq.ParquetFile(path).metadata.num_rows for path in self.paths]  # the footers only
        self.starts = np.cumsum([0, *sizes]).tolist()  # item i lies in shard bisect_right(starts, i) - 1
        if not self.starts[-1]:
            raise ValueError(f"{directory} holds no feature shards; featurize the manifest first")
        self.tables: dict[int, pa.Table] = {}
        self.peak_rows_held = 0
        if not streaming:
            for shard in range(len(self.paths)):
                self._hold(shard)

    def __len__(self) -> int:
        return self.starts[-1]

    def __getitem__(self, item: int) -> dict[str, Any]:
        if not 0 <= item < len(self):
            raise IndexError(f"item {item} of {len(self)}")
        shard = bisect.bisect_right(self.starts, item) - 1
        return read_example(self._hold(shard), item - self.starts[shard])

    def _hold(self, shard: int) -> pa.Table:
        if shard not in self.tables:
            if self.streaming:
                self.tables.clear()
            self.tables[shard] = pq.read_table(self.paths[shard], memory_map=True)
            self.peak_rows_held = max(self.peak_rows_held, sum(t.num_rows for t in self.tables.values()))
        return self.tables[shard]

    def epoch_order(self, seed: int) -> list[int]:
        """Every item once, shuffled shard by shard: the shards in a seeded order, each shard's rows shuffled
        within it (as WebDataset and lhotse's shar shuffle what cannot be held whole), so a streaming pass
        reads each shard once."""
        generator = torch.Generator().manual_seed(seed)
        order = []
        for shard in torch.randperm(len(self.paths), generator=generator).tolist():
            start, size = self.starts[shard], self.starts[shard + 1] - self.starts[shard]
            order += [start + row for row in torch.randperm(size, generator=generator).tolist()]
        return order


__all__ = [
    "REPORT_FILE",
    "CachedFeatures",
    "FeatureShards",
    "cache_key",
    "condition_split",
    "featurize",
    "window_features",
]
