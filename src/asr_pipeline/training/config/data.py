"""``train.data``: what a run trains and validates on, how it is batched and augmented."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from asr_pipeline.data.batch_units import BatchUnit
from asr_pipeline.options import setting
from asr_pipeline.training.config.checks import non_negative, positive


def bucket_spec(text: str) -> int | list[int]:
    """``--pad-to-buckets``: a count ("8") or comma-separated frame lengths ("400,800,1600")."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        values = [int(part) for part in parts]
    except ValueError:
        raise ValueError(
            f"--pad-to-buckets: expected a count (8) or ascending frame lengths (400,800,1600), got {text!r}"
        ) from None
    return values[0] if len(values) == 1 and "," not in text else values


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    train_manifests: list[str] = setting(
        help="Feature shard files (io.shards) or raw manifests (io.manifests: JSONL/JSON/TSV/Parquet records or audio folders, featurized on the fly, see data.audio_dataset), read in this order; one kind per split."
    )
    val_manifests: list[str] = setting(default_factory=list, help="empty: no validation")
    length_index: str | None = setting(
        None, help="Parquet from the index stage; rebuilt in memory when stale or absent"
    )
    # A folder caching the length index of the training/validation shards (one file per shard list); a
    # stale or missing one is rebuilt and written there. Used when length_index is unset.
    dataset_index_dir: str | None = setting(
        None,
        help="cache the shards' length index in this folder: reused while every shard's fingerprint matches, rebuilt and rewritten when one changed",
        flag="--dataset-index-dir",
        metavar="DIR",
    )
    # Feature bins F; every shard row must have cols == input_dim. None: the width of model.architecture's
    # frontend (80 fbank bins; 160 for w2v-bert), resolved when the config is (the saved config has it).
    input_dim: int | None = setting(
        None,
        help="feature bins per frame (the shards' cols)",
        flag="--input-dim",
        shown_default="the architecture's frontend: 80 (fbank), 160 (w2v-bert)",
    )
    max_train_samples: int | None = setting(
        None, help="keep the first N training examples", flag="--max-train-samples"
    )
    max_val_samples: int | None = setting(
        None, help="keep the first N validation examples", flag="--max-val-samples"
    )
    batch_size: int | None = setting(
        None, help="fixed batch size; unset: adaptive batches", flag="--batch-size"
    )
    # What adaptive_batch_budget counts (data.sampler): padded units count batch size * longest example,
    # the others sum the examples' amounts.
    adaptive_batch_unit: BatchUnit = setting(
        "padded-frames",
        help="what --adaptive-batch-budget counts: padded-* units count batch size * longest example, the others sum the examples' amounts (feature-values: frames * feature dim; padded-attention: batch size * longest frames squared)",
        flag="--adaptive-batch-unit",
    )
    adaptive_batch_budget: int = setting(
        20000,
        help="most an adaptive batch may cost, in --adaptive-batch-unit; a longer example forms a batch of one, counted in the data event",
        flag="--adaptive-batch-budget",
    )
    # (padded-attention: batch size * longest T squared, the attention scores of a model that keeps the frame rate)
    adaptive_batch_max_samples: int = setting(
        64, help="utterances per adaptive batch at most", flag="--adaptive-batch-max-samples"
    )
    max_audio_duration_sec: float | None = setting(
        None,
        help="drop (and count) longer training examples (validation too with "
        "--max-audio-duration-filters-validation)",
        flag="--max-audio-duration-sec",
        unit="s",
    )
    max_audio_duration_filters_validation: bool = setting(
        False,
        help="--max-audio-duration-sec drops longer validation examples too",
        flag="--max-audio-duration-filters-validation",
        reference=True,
        reference_note="the reference trainer's --max-audio-duration-sec filters validation as well; ours "
        "validates on every example, so a validation score covers the whole split",
    )
    # Frame labels of the training data (training.alignment: the align stage's Parquet). Set: the model trains
    # with frame-wise cross-entropy on them instead of CTC (a CTC-output architecture of the same frame rate).
    alignment: str | None = setting(
        None,
        help="frame labels of the training data (the align stage's Parquet): train with frame-wise cross-entropy on them instead of CTC; for hubert-pretrain, the units it predicts",
        flag="--alignment",
        metavar="PARQUET",
    )
    # The same for the validation data: a HuBERT pretraining run validates its unit prediction on them.
    val_alignment: str | None = setting(
        None,
        help="frame labels of the validation data (hubert-pretrain: the validation utterances' units)",
        flag="--val-alignment",
        metavar="PARQUET",
    )
    # Chunked training of long utterances (RETURNN's ``chunking``, data.chunking): each training utterance's
    # features cut into chunks of chunk_frames frames every chunk_step_frames frames, each trained with the
    # loss on its own frame labels. Frame-wise training only: a chunk's targets come from the alignment.
    chunk_frames: int | None = setting(
        None,
        help="cut every training utterance into chunks of N feature frames, each trained with the loss on its own frame labels (RETURNN's chunking; needs --alignment, whose labels give each chunk its targets); validation keeps whole utterances; unset: whole utterances",
        flag="--chunk-frames",
        metavar="N",
    )
    chunk_step_frames: int | None = setting(
        None,
        help="frames from one chunk's start to the next (below --chunk-frames: chunks overlap); a multiple of the model's input frames per output frame (its subsampling, e.g. 4)",
        flag="--chunk-step-frames",
        metavar="S",
        shown_default="--chunk-frames (adjacent chunks)",
    )
    sort_buffer_size: int = setting(
        4096, help="examples sorted by length together", flag="--sort-buffer-size"
    )
    sort_by_length_desc: bool = setting(
        False,
        help="sort each buffer longest first and keep that batch order (the largest batch of a buffer runs first, so an out-of-memory batch fails early); unset: shortest first, batches shuffled",
        flag="--sort-by-length-desc",
    )
    # Feature shards mixed at once when shuffling (data.sampler, shard windows): each epoch shuffles the
    # shards, then the examples of this many shards at a time, so a rank holds this many decompressed shards
    # (plus one) however large the corpus; 0 or None: one global shuffle, every shard held once read.
    shuffle_window_shards: int | None = setting(
        8,
        help="feature shards shuffled together: an epoch shuffles the shards, then the examples of N shards at a time, so memory holds N+1 shards whatever the corpus size; 0: one global shuffle",
        flag="--shuffle-window-shards",
    )
    # Static shapes for run.compile (issue 36): each training batch's T is zero-padded up to one of a few
    # lengths (data.batching.TimeBuckets), so a compiled model compiles once per length, not once per batch.
    # A count N: N lengths in ratio 1.25 ending at the longest training example (under 20 % of a bucket's
    # frames are padding it adds); a list: those lengths. The padded-frames budget counts the padding.
    pad_to_buckets: int | list[int] | None = setting(
        None,
        help="pad every training batch's time axis to one of a few lengths, so a compiled model (--compile) compiles once per length: a count N (N lengths, each 1.25x the previous, up to the longest training example, multiples of 16) or comma-separated frame lengths; unset: no padding beyond the batch's longest",
        flag="--pad-to-buckets",
        metavar="N|LIST",
        parse=bucket_spec,
    )
    num_workers: int = setting(
        0,
        help="DataLoader worker processes per rank; with shard windows each reads shards of its own, so the count shapes the epoch's batch order",
        flag="--num-workers",
    )
    prefetch_factor: int | None = setting(
        None,
        help="batches each loader worker prepares ahead (needs --num-workers > 0); unset: torch's 2",
        flag="--prefetch-factor",
    )
    pin_memory: bool | None = setting(
        None,
        help="page-locked host batches for asynchronous copies to the GPU; ignored with a warning without CUDA; unset: on with --backend cuda",
        flag="--pin-memory",
    )
    spec_time_masks: int = setting(
        2,
        help="SpecAugment time masks per example",
        flag="--spec-time-masks",
        reference=0,
        reference_note="SpecAugment is off in the reference trainer; on here: every recipe we measured "
        "generalizes better with it (docs/results/accuracy-per-minute.md)",
    )
    spec_time_mask_max_frames: int = setting(
        40, help="frames per time mask at most", flag="--spec-time-mask-max-frames"
    )
    spec_freq_masks: int = setting(
        2,
        help="SpecAugment frequency masks per example",
        flag="--spec-freq-masks",
        reference=0,
        reference_note="as --spec-time-masks",
    )
    spec_freq_mask_max_bins: int = setting(
        15, help="bins per frequency mask at most", flag="--spec-freq-mask-max-bins"
    )
    # Waveform augmentation, raw manifests only (an error with feature shards): a uniform gain in
    # [min, max] dB and Gaussian noise of this standard deviation (waveform in [-1, 1]) per training
    # example, before the features; seeded by (run.seed, epoch, example). Never on validation.
    waveform_gain_min_db: float = setting(
        0.0,
        help="lowest random gain per training example, in dB (raw audio manifests only)",
        flag="--waveform-gain-min-db",
    )
    waveform_gain_max_db: float = setting(
        0.0,
        help="highest random gain per training example, in dB (raw audio manifests only)",
        flag="--waveform-gain-max-db",
    )
    waveform_noise_std: float = setting(
        0.0,
        help="noise added to training waveforms in [-1, 1] (raw audio only): the standard deviation of Gaussian "
        "noise, or the amplitude of uniform noise with --waveform-noise-kind uniform",
        flag="--waveform-noise-std",
    )
    waveform_noise_kind: Literal["gaussian", "uniform"] = setting(
        "gaussian",
        help="the waveform noise's distribution: gaussian (std --waveform-noise-std) or uniform in "
        "[-std, std] (features.augment.WaveformAugment)",
        flag="--waveform-noise-kind",
        reference="uniform",
        reference_note="the reference trainer reads --waveform-noise-std as a uniform noise's amplitude; ours "
        "as a Gaussian's standard deviation, the usual meaning of std",
    )

    def __post_init__(self) -> None:
        positive(
            self,
            "input_dim",
            "adaptive_batch_budget",
            "adaptive_batch_max_samples",
            "sort_buffer_size",
            "batch_size",
            "max_train_samples",
            "max_val_samples",
            "max_audio_duration_sec",
            "prefetch_factor",
            "chunk_frames",
            "chunk_step_frames",
        )
        non_negative(
            self,
            "shuffle_window_shards",
            "num_workers",
            "spec_time_masks",
            "spec_time_mask_max_frames",
            "spec_freq_masks",
            "spec_freq_mask_max_bins",
            "waveform_noise_std",
        )
        buckets = self.pad_to_buckets
        if isinstance(buckets, int) and buckets < 1:
            raise ValueError(f"pad_to_buckets must be a count >= 1 or a list of frame lengths, got {buckets}")
        if isinstance(buckets, list) and (not buckets or buckets != sorted(set(buckets)) or buckets[0] < 1):
            raise ValueError(
                f"pad_to_buckets={buckets}: give strictly ascending frame lengths >= 1 (e.g. 400,800,1600)"
            )
        if self.waveform_gain_min_db > self.waveform_gain_max_db:
            raise ValueError(
                f"waveform_gain_min_db={self.waveform_gain_min_db} is above waveform_gain_max_db="
                f"{self.waveform_gain_max_db}; give min <= max (equal values apply a fixed gain)"
            )
        if self.chunk_frames is None and self.chunk_step_frames is not None:
            raise ValueError(
                f"chunk_step_frames={self.chunk_step_frames} spaces chunks, but chunk_frames is unset: "
                "set chunk_frames (--chunk-frames) too, or unset chunk_step_frames"
            )
        if self.chunk_frames is not None and self.chunk_step > self.chunk_frames:
            raise ValueError(
                f"chunk_step_frames={self.chunk_step_frames} is above chunk_frames={self.chunk_frames}: the "
                "frames between two chunks would never be trained; give a step <= chunk_frames"
            )
        if self.chunk_frames is not None and self.alignment is None:
            raise ValueError(
                "chunk_frames needs per-frame targets: set alignment (--alignment, the align stage's frame "
                "labels); a CTC transcript cannot be cut into chunks without knowing which frames hold "
                "which tokens"
            )
        if self.prefetch_factor is not None and self.num_workers == 0:
            raise ValueError(
                f"prefetch_factor={self.prefetch_factor} needs num_workers > 0 (it counts batches each "
                "worker loads ahead); set num_workers or leave prefetch_factor unset"
            )

    @property
    def chunk_step(self) -> int:
        """Frames from one chunk's start to the next: chunk_step_frames, else chunk_frames (0: no chunking)."""
        return self.chunk_step_frames or self.chunk_frames or 0

    @property
    def waveform_augmentation(self) -> bool:
        """True when any waveform augmentation is configured."""
        return (self.waveform_gain_min_db, self.waveform_gain_max_db, self.waveform_noise_std) != (0, 0, 0)
