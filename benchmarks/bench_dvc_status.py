"""How long a no-op `dvc status` and `dvc repro` take once a stage's output holds many feature shards (issue 18).

A throwaway git + DVC project with the shape of ours: a `features` stage writing N shard files into one output
folder and an `index` stage depending on that folder. After the first `dvc repro` (which hashes every file),
`dvc status` and a no-op `dvc repro` are timed (best of --repeats fresh processes, wall clock): what a user waits
for before anything reruns. Shards are random bytes of --shard-kib each (DVC hashes bytes, not Parquet).

    .venv/bin/python benchmarks/bench_dvc_status.py                    # 1,000 and 5,000 shards of 256 KiB
    .venv/bin/python benchmarks/bench_dvc_status.py --shards 100 1000 --shard-kib 64
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
MAKE_SHARDS = """
import os, sys
from pathlib import Path
count, size = int(sys.argv[1]), int(sys.argv[2])
out = Path("features"); out.mkdir(exist_ok=True)
for i in range(count):
    (out / f"shard-{i:05d}.parquet").write_bytes(os.urandom(size))
"""


def run(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"}
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed in {cwd}: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def project(root: Path, shards: int, kib: int) -> Path:
    root.mkdir(parents=True)
    (root / "make_shards.py").write_text(MAKE_SHARDS)
    (root / "dvc.yaml").write_text(
        "stages:\n"
        "  features:\n"
        f"    cmd: {sys.executable} make_shards.py {shards} {kib * 1024}\n"
        "    deps: [make_shards.py]\n"
        "    outs: [features]\n"
        "  index:\n"
        "    cmd: ls features | wc -l > index.txt\n"
        "    deps: [features]\n"
        "    outs: [index.txt]\n"
    )
    run(["git", "init", "-q"], root)
    run([str(BIN / "dvc"), "init", "-q"], root)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--shard-kib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-dvc-") as tmp:
        for count in args.shards:
            root = project(Path(tmp) / f"n{count}", count, args.shard_kib)
            first = run([str(BIN / "dvc"), "repro", "-q"], root)
            status = min(run([str(BIN / "dvc"), "status", "-q"], root) for _ in range(args.repeats))
            repro = min(run([str(BIN / "dvc"), "repro", "-q"], root) for _ in range(args.repeats))
            rows.append((count, first, status, repro))
            print(f"{count} shards: first repro {first:.1f} s, status {status:.2f} s, no-op repro {repro:.2f} s",
                  flush=True)  # fmt: skip
            shutil.rmtree(root)
    print(f"\nshards of {args.shard_kib} KiB, best of {args.repeats}; target: status <= 5 s at 1,000 shards")
    print(f"{'shards':>7s} {'first repro s':>14s} {'dvc status s':>13s} {'no-op repro s':>14s}")
    for count, first, status, repro in rows:
        print(f"{count:7d} {first:14.1f} {status:13.2f} {repro:14.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
