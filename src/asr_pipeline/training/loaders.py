"""The training and validation DataLoaders of one rank: examples selected from the shards' length
index, length-bucketed batches split across ranks, SpecAugment on training examples only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader

from asr_pipeline.data.collate import collate_batch
from asr_pipeline.data.dataset import SelectionReport, ShardDataset, select_examples
from asr_pipeline.data.length_index import load_length_index
from asr_pipeline.data.sampler import LengthBucketedBatchSampler
from asr_pipeline.features.augment import SpecAugment
from asr_pipeline.training.config import TrainConfig
from asr_pipeline.training.distributed import DistributedContext


@dataclass
class DataBundle:
    train_loader: DataLoader
    train_sampler: LengthBucketedBatchSampler
    val_loader: DataLoader | None
    train_selection: SelectionReport
    train_audio_hours: float


def build_data(config: TrainConfig, ctx: DistributedContext) -> DataBundle:
    data = config.data
    if not data.train_manifests:
        raise ValueError("data.train_manifests is empty: give at least one training shard")
    max_duration_ms = (
        None if data.max_audio_duration_sec is None else round(data.max_audio_duration_sec * 1000)
    )
    train_index, selection = select_examples(
        load_length_index(data.train_manifests, data.length_index),
        max_duration_ms=max_duration_ms,
        max_samples=data.max_train_samples,
    )
    if train_index.num_rows == 0:
        raise ValueError(
            f"no training examples left of {selection.available} in {data.train_manifests} "
            f"({selection.too_long} longer than max_audio_duration_sec={data.max_audio_duration_sec})"
        )
    _check_feature_dim(train_index, data.input_dim)
    augment = SpecAugment(
        data.spec_time_masks,
        data.spec_time_mask_max_frames,
        data.spec_freq_masks,
        data.spec_freq_mask_max_bins,
    )
    train_set = ShardDataset(train_index, transform=augment)
    batching = {
        "batch_size": data.batch_size,
        "sort_buffer_size": data.sort_buffer_size,
        "num_replicas": ctx.world_size,
        "rank": ctx.rank,
    }
    if data.batch_size is None:
        batching.update(max_frames=data.adaptive_batch_budget, max_samples=data.adaptive_batch_max_samples)
    train_sampler = LengthBucketedBatchSampler(
        train_set.num_frames, shuffle=True, seed=config.run.seed, uneven="drop", **batching
    )
    train_loader = _loader(train_set, train_sampler, data.num_workers, ctx, config.run.seed)

    val_loader = None
    if data.val_manifests:
        val_index, _ = select_examples(
            load_length_index(data.val_manifests, data.length_index), max_samples=data.max_val_samples
        )
        _check_feature_dim(val_index, data.input_dim)
        val_set = ShardDataset(val_index)
        # "pad" so no rank has zero batches; the duplicates are removed by utterance id after gathering.
        val_sampler = LengthBucketedBatchSampler(val_set.num_frames, shuffle=False, uneven="pad", **batching)
        val_loader = _loader(val_set, val_sampler, data.num_workers, ctx, config.run.seed)
    hours = float(train_set.duration_ms.sum()) / 3.6e6
    return DataBundle(train_loader, train_sampler, val_loader, selection, hours)


def _loader(
    dataset: ShardDataset,
    sampler: LengthBucketedBatchSampler,
    num_workers: int,
    ctx: DistributedContext,
    seed: int,
) -> DataLoader:
    # A generator of its own: otherwise every new DataLoader iterator (one per epoch) draws its worker
    # base seed from the global RNG, and a run resumed mid-epoch would draw other SpecAugment masks.
    generator = torch.Generator().manual_seed(seed + ctx.rank)
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=collate_batch,
        num_workers=num_workers,
        pin_memory=ctx.device.type == "cuda",
        persistent_workers=num_workers > 0,
        generator=generator,
    )


def _check_feature_dim(index: Any, input_dim: int) -> None:
    cols = index.column("cols").to_numpy()
    wrong = (cols != input_dim).nonzero()[0]
    if len(wrong):
        first = int(wrong[0])
        raise ValueError(
            f"{len(wrong)} examples have a feature dimension other than data.input_dim={input_dim}, e.g. "
            f"row {index.column('row')[first].as_py()} of {index.column('shard')[first].as_py()} has "
            f"{int(cols[first])}; set data.input_dim or re-extract the features"
        )


__all__ = ["DataBundle", "build_data"]
