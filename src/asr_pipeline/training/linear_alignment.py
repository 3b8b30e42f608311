"""The classic linear-alignment bootstrap of the alignment -> frame-wise cross-entropy recipe: the first frame
labels made without a trained aligner, each utterance's tokens spread evenly over the frames of the model
the recipe trains (the "linear segmentation" HMM systems and RETURNN's recipes start from); the usual
realign/train loop (``training.alignment``) takes over from the model trained on it.

An utterance's labels: its tokens with a blank between each repeated pair (the shortest CTC path, so the
labels collapse to the reference, greedy decoding of a frame-wise model keeps double letters, and the
realigning Viterbi pass starts from a path it could have chosen) -- n labels -- over its T' output frames,
label j on the frames [floor(j T' / n), floor((j + 1) T' / n)), the uniform split the Paraformer queries use
(``models.paraformer_queries.uniform_membership``). An utterance with fewer frames than labels (T' < n) has
no alignment: it is skipped, counted and named in the report, as ``align_shards`` skips one.

T' is what the trained model outputs for the utterance's T feature frames: its ``output_lengths``, from
the model its config builds (no weights needed). The file is ``align_shards``'s (``ALIGNMENT_SCHEMA``),
the score column null: no model scored the path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch
from torch import Tensor

from asr_pipeline.models.loading import build_model_for
from asr_pipeline.models.paraformer_queries import uniform_membership
from asr_pipeline.models.registry import default_input_dim
from asr_pipeline.options import from_dict
from asr_pipeline.training.alignment import (
    ALIGNMENT_SCHEMA,
    FIRST_SKIPPED,
    AlignmentReport,
    write_alignment,
)
from asr_pipeline.training.config.model import ModelConfig
from asr_pipeline.training.ctc import output_lengths_of


def path_labels(tokens: Sequence[int], blank: int) -> list[int]:
    """``tokens`` with ``blank`` between each repeated pair: the shortest CTC path of them."""
    labels: list[int] = []
    for token in tokens:
        if labels and labels[-1] == token:
            labels.append(blank)
        labels.append(token)
    return labels


def linear_labels(tokens: Sequence[int], frames: int, blank: int) -> np.ndarray:
    """The (frames,) int64 linear alignment of ``tokens`` (module docstring); a ValueError when the frames
    cannot hold the labels."""
    labels = path_labels(tokens, blank)
    if not labels or frames < len(labels):
        raise ValueError(
            f"{frames} frames < {max(len(labels), 1)} needed for {len(tokens)} tokens"
            + ("" if labels else " (an empty transcript has nothing to align)")
        )
    membership = uniform_membership(torch.tensor([frames]), torch.tensor([len(labels)]), frames)[
        0
    ]  # (n, T') bool, one label per frame
    return np.asarray(labels, dtype=np.int64)[membership.int().argmax(0).numpy()]


def model_output_lengths(train_params: Mapping[str, Any]) -> tuple[Callable[[Tensor], Tensor], int]:
    """The output-length arithmetic of the model params.yaml ``train``-shaped ``train_params`` build (built
    on the CPU, without weights) and its blank id."""
    model_config = from_dict(ModelConfig, train_params.get("model") or {}, "train.model")
    input_dim = (train_params.get("data") or {}).get("input_dim") or default_input_dim(
        model_config.architecture
    )
    # Any vocabulary: the output layer's width never changes the frame count.
    model, _ = build_model_for(model_config, input_dim=input_dim, vocab_size=model_config.vocab_size or 2)
    return output_lengths_of(model), model_config.blank_id


def linear_align_shards(
    shard_paths: Sequence[str | Path],
    output: str | Path,
    output_lengths: Callable[[Tensor], Tensor],
    blank: int,
) -> AlignmentReport:
    """The linear alignment of every utterance of ``shard_paths`` over the frames ``output_lengths`` gives
    for its feature frames; writes ``output`` (Parquet, ``ALIGNMENT_SCHEMA``) and reports what it skipped."""
    report = AlignmentReport()
    rows: dict[str, list] = {name: [] for name in ALIGNMENT_SCHEMA.names}
    for path in shard_paths:
        table = pq.read_table(path, columns=["id", "rows", "tokens"]).to_pydict()
        frames = output_lengths(torch.tensor(table["rows"], dtype=torch.int64)).tolist()  # (N,) T'
        for utterance, count, tokens in zip(table["id"], frames, table["tokens"], strict=True):
            report.utterances += 1
            try:
                labels = linear_labels(tokens, count, blank)
            except ValueError as error:
                report.skipped += 1
                if len(report.first_skipped) < FIRST_SKIPPED:
                    report.first_skipped.append(f"{utterance}: {error}")
                continue
            rows["id"].append(utterance)
            rows["frames"].append(count)
            rows["labels"].append(labels.tolist())
            rows["score"].append(None)
    report.aligned = len(rows["id"])
    return write_alignment(rows, output, report, "linear alignment", "have fewer frames than labels")


__all__ = ["linear_align_shards", "linear_labels", "model_output_lengths", "path_labels"]
