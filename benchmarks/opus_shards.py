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
import pyarrow.compute as pc
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
    with ProcessPoolExecutor(jobs) as pool:
        for shard in sorted(source.glob("*.parquet")):
            table = pq.read_table(shard)
            opus = list(pool.map(encode, table.column("features").to_pylist(), chunksize=16))
            table = table.drop_columns(["features"]).append_column("opus", pa.array(opus, pa.binary()))
            tables.append(table.append_column("shard", pa.array([shard.name] * table.num_rows)))
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.concat_tables(tables), target)
    print(
        f"{source}: {sum(t.num_rows for t in tables)} utterances -> {target} ({target.stat().st_size / 1e6:.1f} MB)"
    )


def unpack(source: Path, target: Path, jobs: int) -> None:
    """The shards as they were: the same names, rows and columns, ``features`` second as extraction writes it."""
    table = pq.read_table(source)
    num_samples = pc.multiply(table.column("rows"), table.column("cols")).to_pylist()
    with ProcessPoolExecutor(jobs) as pool:
        samples = list(pool.map(decode, table.column("opus").to_pylist(), num_samples, chunksize=16))
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in samples])]).astype(np.int32)
    features = pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.concatenate(samples)))
    table = table.drop_columns(["opus"]).add_column(1, "features", features)
    target.mkdir(parents=True, exist_ok=True)
    names = table.column("shard").unique().to_pylist()
    for name in sorted(names):
        shard = table.filter(pc.equal(table.column("shard"), name)).drop_columns(["shard"])
        pq.write_table(shard, target / name)
    print(f"{source} -> {target}: {table.num_rows} utterances in {len(names)} shards")


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
