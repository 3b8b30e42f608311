"""Manifest streaming: rows/s and peak memory of ``iter_manifest`` over JSONL manifests of 10k, 100k, 1M rows.

Each manifest (audio_path + text + tokens per line) is written once into a temporary folder, then streamed
through ``iter_manifest`` with a ``SkipReport`` in a fresh subprocess per size, so each size has its own
peak RSS (``ru_maxrss`` never goes down within a process). Streaming holds one record at a time, so the
peak should not grow with the file: the 1M / 10k peak ratio is printed and should be close to 1.

    .venv/bin/python benchmarks/bench_manifest_streaming.py        # or: make bench
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = (10_000, 100_000, 1_000_000)
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "a",
    "small",
    "cat",
    "sat",
    "on",
    "the",
    "warm",
    "mat",
]


def write_manifest(path: Path, num_rows: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for index in range(num_rows):
            words = [WORDS[(index + k) % len(WORDS)] for k in range(8)]
            record = {
                "id": f"utt{index:07d}",
                "audio_path": f"audio/{index % 1000:03d}/utt{index:07d}.flac",
                "text": " ".join(words),
                "tokens": [(index + k) % 500 for k in range(24)],
            }
            handle.write(json.dumps(record) + "\n")


def measure(path: str) -> None:
    """Child process: stream one manifest and print its numbers as JSON."""
    from asr_pipeline.io.manifests import iter_manifest
    from asr_pipeline.io.report import SkipReport

    baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # interpreter + imports, Linux: KiB
    report = SkipReport()
    start = time.perf_counter()
    rows = sum(1 for _ in iter_manifest(path, report))
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "rows": rows,
                "skipped": report.skipped,
                "seconds": seconds,
                "baseline_kib": baseline_kib,
                "peak_kib": peak_kib,
            }
        )
    )


def main() -> None:
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for num_rows in SIZES:
            path = Path(folder) / f"manifest_{num_rows}.jsonl"
            write_manifest(path, num_rows)
            child = subprocess.run(
                [sys.executable, __file__, "--measure", str(path)], capture_output=True, text=True, check=True
            )
            result = json.loads(child.stdout.strip().splitlines()[-1])
            result["megabytes"] = path.stat().st_size / 1e6
            results.append(result)

    print(
        f"{'rows':>10} {'file MB':>9} {'rows/s':>10} {'peak RSS MiB':>13} {'after imports MiB':>18} {'skipped':>8}"
    )
    for r in results:
        print(
            f"{r['rows']:>10,} {r['megabytes']:>9.1f} {r['rows'] / r['seconds']:>10,.0f} "
            f"{r['peak_kib'] / 1024:>13.1f} {r['baseline_kib'] / 1024:>18.1f} {r['skipped']:>8}"
        )
    first, last = results[0], results[-1]
    growth = (
        (last["peak_kib"] - last["baseline_kib"]) / 1024,
        (first["peak_kib"] - first["baseline_kib"]) / 1024,
    )
    print(
        f"peak RSS {last['rows']:,} / {first['rows']:,}: {last['peak_kib'] / first['peak_kib']:.2f} (flat streaming ~ 1)"
    )
    print(
        f"growth above imports: {growth[0]:.1f} MiB at {last['rows']:,} rows, {growth[1]:.1f} MiB at {first['rows']:,}"
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        measure(sys.argv[2])
    else:
        main()
