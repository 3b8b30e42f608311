"""Frame alignments of the training data, and training on them: the classic CTC -> Viterbi alignment ->
frame-wise cross-entropy recipe (RETURNN's custom multi-stage pipeline), one cached DVC stage per step.

``align_shards`` runs a trained CTC-output model (``models.loading.load_run_model``) over feature shards and
writes, for every utterance, the Viterbi path of its reference tokens (``modules.forced_alignment``): one
label per model output frame, the token the frame belongs to or the blank. The file (Parquet,
``ALIGNMENT_SCHEMA``) sits beside the shards as a DVC output; an utterance whose frames cannot hold its tokens
has no alignment and is skipped, counted and named in the report (never silently dropped).

Training on an alignment (``data.alignment``, ``load_alignment``): every training utterance carries its frame
labels (``AlignedDataset``), and the loss is the frame-wise cross-entropy of the model's (B, T', V) log-probs
against them, summed over each utterance's frames (``training.ctc.model_losses``); the model must produce as
many frames as the aligning one did (same architecture family and subsampling), which is checked per utterance.
An utterance without a label sequence is a counted skip of the epoch. Validation still scores CTC-style:
greedy decoding of the frame posteriors and ``val_loss`` the CTC loss (the blank is one of the frame classes).
Realigning with the frame-wise model closes the loop (``align_shards`` accepts any CTC-output run). The first
alignment may instead be the linear one, which needs no trained model (``training.linear_alignment``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import Dataset
from tqdm import tqdm

from asr_pipeline.data.collate import SkippedExample, collate_batch
from asr_pipeline.data.dataset import ShardDataset
from asr_pipeline.data.length_index import build_length_index
from asr_pipeline.executors import ExecutorOptions, map_ordered
from asr_pipeline.models.loading import RunModel, load_run_model
from asr_pipeline.models.spec import has_frame_posteriors
from asr_pipeline.modules.forced_alignment import forced_paths, min_frames
from asr_pipeline.run_layout import CHECKPOINT_POINTER, resolve_run_dir

log = logging.getLogger(__name__)

ALIGNMENT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("frames", pa.int32()),  # model output frames T'
        ("labels", pa.list_(pa.int32())),  # (T',) the token of each frame, or the blank
        ("score", pa.float32()),  # the path's summed log-probability
    ]
)
FIRST_SKIPPED = 10  # skipped utterances the report names


@dataclass
class AlignmentReport:
    """What ``align_shards`` did: utterances aligned and skipped (with the first ids and why)."""

    utterances: int = 0
    aligned: int = 0
    skipped: int = 0
    first_skipped: list[str] = field(default_factory=list)
    mean_score_per_frame: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def align_shards(
    run_dir: str | Path,
    shard_paths: Sequence[str | Path],
    output: str | Path,
    *,
    batch_size: int = 16,
    progress: bool = True,
    jobs: int = 1,
    executor: ExecutorOptions | None = None,
) -> AlignmentReport:
    """Align every utterance of ``shard_paths`` with the model of ``run_dir``; write ``output`` (Parquet).

    Each shard is one task (batches of ``batch_size`` within it), run in this process, in ``jobs`` worker
    processes or on a Dask cluster (``executor``, asr_pipeline.executors); rows come back in shard order,
    and every task computes with one torch thread, so the file is byte-identical for any of them.
    """
    loaded = _run_model(str(Path(run_dir).resolve()))  # refused here, before any worker starts
    if not has_frame_posteriors(loaded.output):
        raise ValueError(
            f"{run_dir} holds a {loaded.architecture} model, which has no CTC frame outputs to align with; "
            "align with a CTC-output run (squeezeformer, zipformer, w2v-bert, or a frame-wise trained one)"
        )
    shards = [str(Path(path).resolve()) for path in shard_paths]  # absolute: a Dask worker runs elsewhere
    report = AlignmentReport()
    rows: dict[str, list] = {name: [] for name in ALIGNMENT_SCHEMA.names}
    score_sum, frame_sum = 0.0, 0
    results = map_ordered(
        _align_shard,
        shards,
        str(Path(run_dir).resolve()),
        batch_size,
        jobs=jobs,
        executor=executor,
        describe=lambda shard: f"aligning {shard}",
    )
    for _, done in tqdm(results, total=len(shards), desc="align", unit="shard", disable=not progress):
        for name in ALIGNMENT_SCHEMA.names:
            rows[name].extend(done.rows[name])
        report.utterances += done.utterances
        report.aligned += len(done.rows["id"])
        report.skipped += len(done.skipped)
        report.first_skipped.extend(done.skipped[: FIRST_SKIPPED - len(report.first_skipped)])
        score_sum, frame_sum = score_sum + done.score_sum, frame_sum + done.frame_sum
    report.mean_score_per_frame = score_sum / frame_sum if frame_sum else None
    return write_alignment(rows, output, report, "align", "have too few frames for their tokens")


def write_alignment(
    rows: dict[str, list], output: str | Path, report: AlignmentReport, stage: str, skipped_because: str
) -> AlignmentReport:
    """``rows`` (``ALIGNMENT_SCHEMA``'s columns) written to ``output`` atomically (a killed writer leaves a
    ``.tmp``), after a warning naming the first utterance the ``stage`` skipped and why (``skipped_because``:
    "have too few frames for their tokens"); returns ``report``."""
    if report.skipped:
        log.warning(
            "%s: %d of %d utterances %s and no alignment, e.g. %s",
            stage,
            report.skipped,
            report.utterances,
            skipped_because,
            report.first_skipped[0],
        )
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    pq.write_table(pa.table(rows, schema=ALIGNMENT_SCHEMA), tmp)
    tmp.replace(output)
    return report


@dataclass
class _ShardAlignment:
    """One shard's part of ``align_shards``: its rows (ALIGNMENT_SCHEMA columns) and what it skipped."""

    rows: dict[str, list]
    utterances: int
    skipped: list[str]  # "<id>: <why>" of every skipped utterance (the report names the first few)
    score_sum: float
    frame_sum: int


@torch.no_grad()
def _align_shard(shard: str, run_dir: str, batch_size: int) -> _ShardAlignment:
    loaded = _run_model(run_dir)
    model, blank = loaded.model, loaded.blank_id
    dataset = ShardDataset(build_length_index([shard]))  # the training loader's item reader
    done = _ShardAlignment({name: [] for name in ALIGNMENT_SCHEMA.names}, len(dataset), [], 0.0, 0)
    for start in range(0, len(dataset), batch_size):
        batch = collate_batch([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
        log_probs, lengths = model(batch.features, batch.feature_lengths)  # (B, T', V), (B,)
        paths, aligned, scores = forced_paths(log_probs, lengths, batch.targets, batch.target_lengths, blank)
        for row, utterance in enumerate(batch.ids):
            frames = int(lengths[row])
            if not bool(aligned[row]):
                tokens = batch.targets[row, : int(batch.target_lengths[row])]
                done.skipped.append(
                    f"{utterance}: {frames} frames < {min_frames(tokens)} needed for {tokens.numel()} tokens"
                )
                continue
            done.rows["id"].append(utterance)
            done.rows["frames"].append(frames)
            done.rows["labels"].append(paths[row, :frames].tolist())
            done.rows["score"].append(float(scores[row]))
            done.score_sum, done.frame_sum = done.score_sum + float(scores[row]), done.frame_sum + frames
    return done


# The last run model this process loaded, with its checkpoint pointer's mtime: a worker aligning many shards
# loads the model once, and a run trained again since (a new pointer) is loaded afresh.
_LOADED: dict[str, tuple[int, RunModel]] = {}


def _run_model(run_dir: str) -> RunModel:
    pointer = resolve_run_dir(run_dir) / CHECKPOINT_POINTER
    stamp = pointer.stat().st_mtime_ns if pointer.is_file() else -1  # none: load_run_model names the problem
    cached = _LOADED.get(run_dir)
    if cached is None or cached[0] != stamp:
        _LOADED.clear()
        _LOADED[run_dir] = (stamp, load_run_model(run_dir))
    return _LOADED[run_dir][1]


def load_alignment(path: str | Path) -> dict[str, np.ndarray]:
    """Utterance id -> its (T',) frame labels (int64) from an ``align_shards`` file."""
    table = pq.read_table(path, columns=["id", "labels"])
    labels = table.column("labels").combine_chunks()
    offsets = labels.offsets.to_numpy()
    values = labels.values.to_numpy().astype(np.int64)
    return {
        utterance: values[offsets[i] : offsets[i + 1]]
        for i, utterance in enumerate(table.column("id").to_pylist())
    }


class AlignedDataset(Dataset):
    """``dataset``'s items with their ``frame_labels`` (T',) added; an utterance the alignment lacks becomes
    a ``SkippedExample`` (counted in the epoch, named in the skip report)."""

    def __init__(self, dataset: Dataset, labels: dict[str, np.ndarray], source: str) -> None:
        self.dataset, self.labels, self.source = dataset, labels, source
        for name in ("num_frames", "num_tokens", "duration_ms", "shard_of"):  # what samplers and reports read
            if hasattr(dataset, name):
                setattr(self, name, getattr(dataset, name))

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, key: Any) -> dict | SkippedExample:
        item = self.dataset[key]
        if isinstance(item, SkippedExample):
            return item
        labels = self.labels.get(item["id"])
        if labels is None:
            return SkippedExample(item["id"], self.source, "no alignment", "the alignment stage skipped it")
        return {**item, "frame_labels": torch.from_numpy(labels)}


__all__ = [
    "ALIGNMENT_SCHEMA",
    "AlignedDataset",
    "AlignmentReport",
    "align_shards",
    "load_alignment",
    "write_alignment",
]
