"""The training and validation DataLoaders of one rank.

Two sources (``data.sources``): feature shards, read through their length index (the fast path), or raw
manifests, decoded and featurized per item (``data.audio_dataset``). Either way the examples are selected
(``max_audio_duration_sec``, ``max_*_samples``), batched by length under the configured budget unit and
split across ranks (``data.sampler``); SpecAugment applies to training examples only, waveform
augmentation to raw training audio only.

Waveform augmentation with feature shards is an error, not a warning: the features were computed before
any gain or noise could be applied, so the flags would silently do nothing and the run would not be the
run that was asked for.

Loader options: ``num_workers`` worker processes per rank, persistent across epochs (no re-fork and no
re-opened shards every epoch), each given the batches of shards of its own (``data.sampler``, readers: a
shard is decoded by one process an epoch); ``prefetch_factor`` batches per worker ahead; ``pin_memory`` unset pins on
the cuda backend only -- page-locked memory only pays for asynchronous host-to-GPU copies, and set to
true without CUDA it is turned off with a warning (torch would warn on every loader anyway).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from asr_pipeline.data.audio_dataset import (
    AudioDataset,
    EpochTaggedBatchSampler,
    PlannedFrontend,
    build_audio_index,
    planned_frontend,
)
from asr_pipeline.data.batching import EpochPlan, TimeBuckets
from asr_pipeline.data.collate import Batch, collate_batch
from asr_pipeline.data.dataset import SelectionReport, ShardDataset, select_examples
from asr_pipeline.data.length_index import cached_length_index, load_length_index
from asr_pipeline.data.sampler import LengthBucketedBatchSampler
from asr_pipeline.data.sources import ManifestKind, resolve_manifests
from asr_pipeline.features.augment import SpecAugment, WaveformAugment
from asr_pipeline.io.report import NothingKeptError, SkipReport
from asr_pipeline.models.registry import frontend_of, get_spec
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.alignment import AlignedDataset, load_alignment
from asr_pipeline.training.config import DataConfig, TrainConfig
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.epoch_schedule import (
    SPEC_AUGMENT_KEYS,
    EpochBatchPlans,
    EpochSettings,
    SpecAugmentByEpoch,
)

logger = logging.getLogger(__name__)


@dataclass
class DataBundle:
    train_loader: DataLoader
    train_sampler: LengthBucketedBatchSampler
    val_loader: DataLoader | None
    train_selection: SelectionReport
    train_audio_hours: float
    report: dict[str, Any]  # the "data" event's values (training.events)


def check_waveform_augmentation(kind: ManifestKind, data: DataConfig) -> None:
    """Refuse waveform augmentation on feature shards (module docstring)."""
    if kind == "shards" and data.waveform_augmentation:
        raise ValueError(
            "waveform augmentation (waveform_gain_min_db/max_db, waveform_noise_std) needs raw audio "
            f"manifests, but the training manifests are feature shards ({data.train_manifests[0]}, ...): "
            "their features were computed without it. Train on the raw manifests, or drop the waveform "
            "options"
        )


def build_data(config: TrainConfig, ctx: DistributedContext) -> DataBundle:
    data = config.data
    if not data.train_manifests:
        raise ValueError("data.train_manifests is empty: give at least one training shard or manifest")
    train_source = resolve_manifests(data.train_manifests, "training manifest")
    check_waveform_augmentation(train_source.kind, data)
    max_duration_ms = (
        None if data.max_audio_duration_sec is None else round(data.max_audio_duration_sec * 1000)
    )
    sources = _Sources(config, ctx)
    train_index, train_skips = sources.index(train_source.kind, train_source.paths)
    train_index, selection = select_examples(
        train_index, max_duration_ms=max_duration_ms, max_samples=data.max_train_samples
    )
    selection = dataclasses.replace(selection, skipped=train_skips.skipped)
    if train_index.num_rows == 0:
        first = "; ".join(shown[0] for shown in train_skips.examples.values() if shown)
        raise NothingKeptError(
            f"no training examples left of {selection.available} in {data.train_manifests} "
            f"({selection.too_long} longer than max_audio_duration_sec={data.max_audio_duration_sec}, "
            f"{selection.skipped} unusable records: {dict(train_skips.counts)}"
            + (f"; first: {first}" if first else "")
            + "). Fix these records (or the options that refuse them) and rerun"
        )
    _check_feature_dim(train_index, data.input_dim)
    # A model that masks its own input (HuBERT's waveform frames) gets no SpecAugment (ArchitectureSpec).
    # CR-CTC masks two views of each batch in the training step (training.cr_ctc): the loader does not.
    masking = get_spec(config.model.architecture).feature_masking and not config.regularization.cr_ctc
    spec_augment = (
        SpecAugment(
            data.spec_time_masks,
            data.spec_time_mask_max_frames,
            data.spec_freq_masks,
            data.spec_freq_mask_max_bins,
        )
        if masking
        else None
    )
    # Training control (training.epoch_schedule): SpecAugment and batch plans by epoch, a curriculum.
    settings = EpochSettings(config)
    by_epoch = SpecAugmentByEpoch(settings) if masking and settings.schedules(*SPEC_AUGMENT_KEYS) else None
    train_set: ShardDataset | AudioDataset
    if train_source.kind == "shards":
        # A shard window's shards stay open, one more for the window boundary (data.sampler).
        window = data.shuffle_window_shards or None
        train_set = ShardDataset(
            train_index,
            transform=spec_augment,
            transform_for_epoch=by_epoch,
            max_open_shards=None if window is None else window + 1,
        )
    else:
        waveform_augment = WaveformAugment(
            data.waveform_gain_min_db,
            data.waveform_gain_max_db,
            data.waveform_noise_std,
            data.waveform_noise_kind,
        )
        train_set = AudioDataset(
            train_index,
            sources.frontend,
            waveform_augment=waveform_augment,
            spec_augment=spec_augment,
            seed=config.run.seed,
            spec_augment_for_epoch=by_epoch,
        )
    if data.alignment is not None:  # frame-wise training (training.alignment)
        train_set = AlignedDataset(train_set, load_alignment(data.alignment), data.alignment)  # type: ignore[assignment]
    plans = EpochBatchPlans(settings, train_set.duration_ms)
    # Static shapes for a compiled model: the training batches' T padded to a few lengths (validation stays
    # unpadded: it runs the eager model).
    time_buckets = (
        None
        if data.pad_to_buckets is None
        else TimeBuckets.from_spec(data.pad_to_buckets, int(train_set.num_frames.max()))
    )
    train_sampler = _batch_sampler(
        train_set,
        data,
        ctx,
        shuffle=True,
        seed=config.run.seed,
        uneven="drop",
        epoch_plan=plans if plans.active else None,
        groups=getattr(train_set, "shard_of", None),  # raw audio has no shards: one global shuffle
        time_buckets=time_buckets,
    )
    loader_sampler: Sampler = train_sampler
    # The dataset needs the epoch to seed its augmentation (raw audio) or to pick the epoch's SpecAugment.
    if train_source.kind == "raw" or by_epoch is not None:
        loader_sampler = EpochTaggedBatchSampler(train_sampler)
    pin_memory = _pin_memory(data.pin_memory, ctx)
    train_loader = _loader(train_set, loader_sampler, data, pin_memory, ctx, config.run.seed, time_buckets)

    val_loader, val_report = None, None
    if data.val_manifests:
        val_source = resolve_manifests(data.val_manifests, "validation manifest")
        val_index, val_skips = sources.index(val_source.kind, val_source.paths)
        # The duration limit filters validation too only when asked (the reference trainer's meaning).
        val_max_ms = max_duration_ms if data.max_audio_duration_filters_validation else None
        val_index, val_selection = select_examples(
            val_index, max_duration_ms=val_max_ms, max_samples=data.max_val_samples
        )
        if val_index.num_rows == 0:
            raise ValueError(f"no validation examples in {data.val_manifests}: {val_skips.to_dict()}")
        _check_feature_dim(val_index, data.input_dim)
        val_set = (
            ShardDataset(val_index)
            if val_source.kind == "shards"
            else AudioDataset(val_index, sources.frontend)  # never augmented
        )
        if data.val_alignment is not None:
            val_set = AlignedDataset(val_set, load_alignment(data.val_alignment), data.val_alignment)  # type: ignore[assignment]
        # "pad" so no rank has zero batches; the duplicates are removed by utterance id after gathering.
        val_sampler = _batch_sampler(val_set, data, ctx, shuffle=False, seed=0, uneven="pad")
        val_loader = _loader(val_set, val_sampler, data, pin_memory, ctx, config.run.seed)
        val_report = {
            "kind": val_source.kind,
            "examples": val_index.num_rows,
            "too_long": val_selection.too_long,
            **_skips(val_skips),
        }
    report = {
        "train": {"kind": train_source.kind, "selection": asdict(selection), **_skips(train_skips)},
        "val": val_report,
        "batching": _batching_report(train_sampler, data),
        "loader": {
            "num_workers": data.num_workers,
            "prefetch_factor": data.prefetch_factor,
            "persistent_workers": data.num_workers > 0,
            "pin_memory": pin_memory,
        },
    }
    hours = float(train_set.duration_ms.sum()) / 3.6e6
    return DataBundle(train_loader, train_sampler, val_loader, selection, hours, report)


class _Sources:
    """Index tables of either kind; the tokenizer and frontend are loaded once, and only for raw data."""

    def __init__(self, config: TrainConfig, ctx: DistributedContext) -> None:
        self.config = config
        self.ctx = ctx

    @functools.cached_property
    def frontend(self) -> PlannedFrontend:
        frontend = planned_frontend(frontend_of(self.config.model.architecture))
        if frontend.feature_dim != self.config.data.input_dim:
            raise ValueError(
                f"raw manifests are featurized for {self.config.model.architecture} with the "
                f"{frontend.frontend.kind} frontend ({frontend.feature_dim} bins per frame) but "
                f"data.input_dim={self.config.data.input_dim}; set input_dim (--input-dim) to "
                f"{frontend.feature_dim}"
            )
        return frontend

    @functools.cached_property
    def tokenizer(self) -> CTCTokenizer | None:
        run = self.config.run
        return CTCTokenizer.from_file(run.tokenizer, self.config.model.blank_id) if run.tokenizer else None

    def index(self, kind: ManifestKind, paths: list[str]) -> tuple[pa.Table, SkipReport]:
        report = SkipReport(strict=False)
        if kind == "shards":
            data = self.config.data
            if data.length_index is None and data.dataset_index_dir is not None:
                # One writer per machine; the other ranks rebuild in memory rather than wait for it.
                write = self.ctx.local_rank == 0
                return cached_length_index(paths, data.dataset_index_dir, write=write), report
            return load_length_index(paths, data.length_index), report
        if self.config.data.length_index is not None:
            logger.info("data.length_index applies to feature shards only; raw manifests are indexed anew")
        return build_audio_index(paths, self.frontend, self.tokenizer, report), report


def _batch_sampler(
    dataset: ShardDataset | AudioDataset,
    data: DataConfig,
    ctx: DistributedContext,
    *,
    shuffle: bool,
    seed: int,
    uneven: str,
    epoch_plan: Callable[[int], EpochPlan | None] | None = None,
    groups: np.ndarray | None = None,
    time_buckets: TimeBuckets | None = None,
) -> LengthBucketedBatchSampler:
    budget = {} if data.batch_size is not None else {"budget": data.adaptive_batch_budget}
    return LengthBucketedBatchSampler(
        dataset.num_frames,
        batch_size=data.batch_size,
        unit=data.adaptive_batch_unit,
        max_samples=None if data.batch_size is not None else data.adaptive_batch_max_samples,
        durations_ms=dataset.duration_ms,
        feature_dim=data.input_dim,
        sort_buffer_size=data.sort_buffer_size,
        sort_descending=data.sort_by_length_desc,
        shuffle=shuffle,
        seed=seed,
        num_replicas=ctx.world_size,
        rank=ctx.rank,
        uneven=uneven,  # type: ignore[arg-type]
        epoch_plan=epoch_plan,
        groups=groups,
        group_window=data.shuffle_window_shards or None,
        time_buckets=time_buckets,
        loader_workers=data.num_workers,  # each worker reads shards of its own (data.sampler)
        **budget,
    )


def _batching_report(sampler: LengthBucketedBatchSampler, data: DataConfig) -> dict[str, Any]:
    fixed = data.batch_size is not None
    return {
        "batch_size": data.batch_size,
        "unit": None if fixed else data.adaptive_batch_unit,
        "budget": None if fixed else data.adaptive_batch_budget,
        "max_samples": None if fixed else data.adaptive_batch_max_samples,
        "sort_buffer_size": data.sort_buffer_size,
        "sort_by_length_desc": data.sort_by_length_desc,
        "shuffle_window_shards": data.shuffle_window_shards if sampler.group_window is not None else None,
        # Each forms a batch of one over the budget, every epoch: a budget too small for the data shows.
        "oversized_examples": sampler.oversized_examples,
        "time_buckets": None if sampler.time_buckets is None else list(sampler.time_buckets.lengths),
        "epoch0": sampler.plan_stats(0).to_dict(),
    }


# How many skipped examples an error names (the first ones met): enough to see a pattern, one line still.
SKIPPED_SHOWN = 5


def nothing_trained_error(skipped: list[str], count: int, what: str) -> NothingKeptError:
    """The error of a run whose examples the loader could all not produce (audio a header check passed but
    that does not decode, ...): ``count`` skipped in ``what``, the first of them (``Batch.skipped`` lines,
    "location: reason (detail)") named."""
    return NothingKeptError(
        f"training: all {count} examples of {what} were skipped, so nothing would be trained (first: "
        f"{'; '.join(skipped[:SKIPPED_SHOWN])}). Fix these records (or the options that refuse them) and rerun"
    )


def _skips(report: SkipReport) -> dict[str, Any]:
    values = report.to_dict()
    return {key: values[key] for key in ("skipped", "skipped_by_reason", "first_skipped")}


def _pin_memory(requested: bool | None, ctx: DistributedContext) -> bool:
    if requested is None:
        return ctx.device.type == "cuda"
    if requested and not torch.cuda.is_available():
        logger.warning("data.pin_memory is set but CUDA is not available; loading into pageable memory")
        return False
    return requested


def _loader(
    dataset: Dataset,
    batch_sampler: Sampler,
    data: DataConfig,
    pin_memory: bool,
    ctx: DistributedContext,
    seed: int,
    time_buckets: TimeBuckets | None = None,
) -> DataLoader:
    # A generator of its own: otherwise every new DataLoader iterator (one per epoch) draws its worker
    # base seed from the global RNG, and a run resumed mid-epoch would draw other SpecAugment masks.
    generator = torch.Generator().manual_seed(seed + ctx.rank)
    workers: dict[str, Any] = {}
    if data.num_workers > 0:
        workers["persistent_workers"] = True
        if data.prefetch_factor is not None:
            workers["prefetch_factor"] = data.prefetch_factor
    return DataLoader(
        dataset,
        batch_sampler=batch_sampler,
        collate_fn=functools.partial(_collate, feature_dim=data.input_dim, time_buckets=time_buckets),
        num_workers=data.num_workers,
        pin_memory=pin_memory,
        generator=generator,
        **workers,
    )


def _collate(items: list, feature_dim: int | None, time_buckets: TimeBuckets | None) -> Batch:
    """``collate_batch`` with T padded up to its time bucket (a module-level function: loader workers
    pickle it)."""
    pad_to = None if time_buckets is None else time_buckets.padded_length
    return collate_batch(items, feature_dim=feature_dim, pad_to=pad_to)


def _check_feature_dim(index: pa.Table, input_dim: int) -> None:
    cols = index.column("cols").to_numpy()
    wrong = (cols != input_dim).nonzero()[0]
    if len(wrong):
        first = int(wrong[0])
        where = (
            f"row {index.column('row')[first].as_py()} of {index.column('shard')[first].as_py()}"
            if "shard" in index.column_names
            else index.column("location")[first].as_py()
        )
        raise ValueError(
            f"{len(wrong)} examples have a feature dimension other than data.input_dim={input_dim}, e.g. "
            f"{where} has {int(cols[first])}; set data.input_dim or re-extract the features"
        )


__all__ = ["DataBundle", "build_data", "check_waveform_augmentation", "nothing_trained_error"]
