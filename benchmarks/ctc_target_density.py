"""How full are a corpus' CTC targets at Zipformer's output frame rates?

CTC needs at least one output frame per target token, plus one blank between each pair of equal neighbours;
training counts the clear failures (``infeasible_targets``) but a target that nearly fills its frames is
already hard to learn (few blank frames, little room for the alignment). This prints, per
``output_downsampling_factor``, the distribution of (tokens + repeats) / output frames over feature shards:

    python benchmarks/ctc_target_density.py data/04_features/train/shard-*.parquet --factors 1 2 4
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

from asr_pipeline.modules.zipformer_subsampling import downsampled_lengths, embed_output_lengths


def read_targets(paths: list[Path]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per utterance: feature frames, tokens, and tokens + adjacent repeats (CTC's minimum frames)."""
    frames, tokens, needed = [], [], []
    for path in paths:
        table = pq.read_table(path, columns=["rows", "tokens"])
        for rows, pieces in zip(table["rows"].to_pylist(), table["tokens"].to_pylist(), strict=True):
            repeats = sum(a == b for a, b in itertools.pairwise(pieces))
            frames.append(rows)
            tokens.append(len(pieces))
            needed.append(len(pieces) + repeats)
    return np.array(frames), np.array(tokens), np.array(needed)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("shards", nargs="+", type=Path, help="feature shards (Parquet with rows and tokens)")
    parser.add_argument(
        "--factors", nargs="+", type=int, default=[1, 2], help="output_downsampling_factor values"
    )
    parser.add_argument("--frame-shift-ms", type=float, default=10.0, help="feature frame shift")
    args = parser.parse_args()

    frames, tokens, needed = read_targets(args.shards)
    seconds = frames * args.frame_shift_ms / 1000
    rate = tokens / seconds
    print(f"{len(frames)} utterances, {seconds.sum() / 3600:.2f} h, {tokens.sum()} tokens")
    print(
        "tokens per second: median {:.1f}, p90 {:.1f}, p99 {:.1f}, max {:.1f}".format(
            *np.percentile(rate, [50, 90, 99]), rate.max()
        )
    )
    print(
        "| output rate | needed / frames: median | p90 | p99 | max | > 0.8 | infeasible (needed > frames) |"
    )
    print("|---|---|---|---|---|---|---|")
    embedded = embed_output_lengths(torch.from_numpy(frames))
    for factor in args.factors:
        out = downsampled_lengths(embedded, factor).numpy()
        density = needed / np.maximum(out, 1)
        p50, p90, p99 = np.percentile(density, [50, 90, 99])
        print(
            f"| {1000 / (2 * factor * args.frame_shift_ms):g} Hz | {p50:.2f} | {p90:.2f} | {p99:.2f} | "
            f"{density.max():.2f} | {(density > 0.8).sum()} | {(needed > out).sum()} |"
        )


if __name__ == "__main__":
    main()
