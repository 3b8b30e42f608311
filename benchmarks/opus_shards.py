"""Carry waveform feature shards (the ``waveform`` frontend's 320-sample frames) to a machine in a tenth of their
size: each utterance's samples as Ogg/Opus bytes (libsndfile through soundfile), every other column as it is.

    python benchmarks/opus_shards.py pack exp/hubert_feats/train .gpu/train.opus.parquet
    python benchmarks/opus_shards.py unpack .gpu/train.opus.parquet /tmp/shards/train

Opus is lossy (about 30 kbit/s here; the largest sample error on the demo corpus was 0.11 of a peak of 0.76): use
it where every compared run reads the same unpacked shards, e.g. the fine-tuned against scratch arms of
``hubert_finetune_arms.py`` on a lent GPU whose transfer limit the float32 shards (453 MB) exceed.
"""

from __future__ import annotations

import argparse
import io
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import soundfile

SAMPLE_RATE = 16_000


def encode(samples: list[float]) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, np.asarray(samples, dtype=np.float32), SAMPLE_RATE, format="OGG", subtype="OPUS")
    return buffer.getvalue()


def decode(data: bytes, num_samples: int) -> np.ndarray:
    samples, rate = soundfile.read(io.BytesIO(data), dtype="float32")
    if rate != SAMPLE_RATE or len(samples) < num_samples:
        raise ValueError(
            f"decoded {len(samples)} samples at {rate} Hz, expected {num_samples} at {SAMPLE_RATE}"
        )
    return samples[:num_samples]


def pack(source: Path, target: Path, jobs: int) -> None:
    tables = []
    for shard in sorted(source.glob("*.parquet")):
        table = pq.read_table(shard)
        with ProcessPoolExecutor(jobs) as pool:
            opus = list(pool.map(encode, table.column("features").to_pylist(), chunksize=16))
        table = table.append_column("shard", pa.array([shard.name] * table.num_rows))
        tables.append(table.drop_columns(["features"]).append_column("opus", pa.array(opus, pa.binary())))
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.concat_tables(tables), target)
    print(
        f"{source}: {sum(t.num_rows for t in tables)} utterances -> {target} ({target.stat().st_size / 1e6:.1f} MB)"
    )


def _decode_row(args: tuple[bytes, int]) -> np.ndarray:
    return decode(*args)


def unpack(source: Path, target: Path, jobs: int) -> None:
    table = pq.read_table(source)
    target.mkdir(parents=True, exist_ok=True)
    rows, cols = table.column("rows").to_pylist(), table.column("cols").to_pylist()
    with ProcessPoolExecutor(jobs) as pool:
        samples = list(
            pool.map(
                _decode_row,
                zip(
                    table.column("opus").to_pylist(),
                    [r * c for r, c in zip(rows, cols, strict=True)],
                    strict=True,
                ),
                chunksize=16,
            )
        )
    features = pa.array([s.tolist() for s in samples], pa.list_(pa.float32()))
    columns = [n for n in table.column_names if n not in ("opus", "shard")]
    shards = table.column("shard").to_pylist()
    for name in sorted(set(shards)):
        keep = [i for i, s in enumerate(shards) if s == name]
        out = table.take(keep).select(columns)
        out = pa.table(
            {
                "id": out.column("id"),
                "features": features.take(pa.array(keep)),
                **{c: out.column(c) for c in columns if c != "id"},
            }
        )
        pq.write_table(out, target / name)
    print(f"{source} -> {target}: {len(shards)} utterances in {len(set(shards))} shards")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=["pack", "unpack"])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    (pack if args.action == "pack" else unpack)(args.source, args.target, args.jobs)


if __name__ == "__main__":
    main()
