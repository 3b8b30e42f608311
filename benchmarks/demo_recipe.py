"""Recipes for the demo's training, side by side: validation CER after each epoch and the wall time it took.

Each arm is `asr-pipeline train` on the demo's shards with params.yaml ``train`` (as the train stage runs it) and
the arm's overrides (``--set`` assignments), for the same number of epochs; the table gives each arm's dev CER
(greedy) per epoch and its seconds per epoch, so recipes compare at equal CPU-minutes. Arms run one after
another; a machine shared with other work inflates every arm's seconds alike only if the load is steady, so the
table states the load average seen.

Then the frontier: every arm's dev CER at the same CPU-minute marks (linear between its epochs), the best arm
at each, and the default recipe marked; `--table-only` prints both tables again from `--out`'s results.jsonl.

Reads what `dvc repro index` left: data/03_tokenizer, data/04_features/{train,dev}.

    .venv/bin/python benchmarks/demo_recipe.py --epochs 4 --arm base= \\
        --arm lr4e-3=optim.learning_rate=4e-3 --out runs/recipe
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

DATA = Path("data")


def base_config(out: Path) -> Path:
    """params.yaml ``train`` (launch options left out) with the demo's shards, tokenizer and run dir."""
    params = yaml.safe_load(Path("params.yaml").read_text())["train"]
    sections = {key: value for key, value in params.items() if key != "launch"}
    sections["data"] = {
        **sections.get("data", {}),
        "train_manifests": [str(p) for p in sorted((DATA / "04_features" / "train").glob("shard-*.parquet"))],
        "val_manifests": [str(p) for p in sorted((DATA / "04_features" / "dev").glob("shard-*.parquet"))],
    }
    sections["run"] = {**sections.get("run", {}), "tokenizer": str(DATA / "03_tokenizer" / "tokenizer.model")}
    path = out / "base_config.json"
    path.write_text(json.dumps(sections, indent=1))
    return path


def run_arm(name: str, assignments: list[str], epochs: int, out: Path, nproc: int) -> dict:
    run_dir = out / name
    command = [
        sys.executable, "-m", "asr_pipeline.cli", "train", "--config", str(base_config(out)),
        "--output-dir", str(run_dir), "--overwrite-output-dir", "--epochs", str(epochs),
        "--nproc-per-node", str(nproc), "--no-dvclive",
        *(part for assignment in assignments for part in ("--set", assignment)),
    ]  # fmt: skip
    started = time.perf_counter()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU-seconds of the launcher and its ranks: what an arm costs, much less swayed by other work on the machine
    # than its wall time (contention still slows memory-bound steps a little).
    cpu_seconds = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    validations = [e for e in events if e["type"] == "validation"]
    epoch_ends = [e for e in events if e["type"] == "epoch"]
    return {
        "arm": name,
        "set": assignments,
        "val_cer": [round(e["values"].get("val_cer", float("nan")), 2) for e in validations],
        "epoch_seconds": [round(e["values"].get("duration_sec", float("nan"))) for e in epoch_ends],
        "wall_seconds": round(seconds),
        "cpu_seconds": round(cpu_seconds),
        "load_average": round(os.getloadavg()[0], 1),
    }


def cpu_minutes_by_epoch(row: dict) -> list[float]:
    """The arm's CPU-minutes spent when each epoch ended: its CPU-seconds (start-up and validations included)
    shared out over the epochs in proportion to their training seconds (the ranks' CPU time per epoch is not
    recorded)."""
    walls = row["epoch_seconds"]
    total = sum(walls)
    spent, out = 0.0, []
    for wall in walls:
        spent += row["cpu_seconds"] * wall / total
        out.append(spent / 60)
    return out


def cer_at(row: dict, minutes: float) -> float | None:
    """The arm's dev CER at ``minutes`` CPU-minutes, linear between its epochs; None before its first epoch ended
    or past its last."""
    points = list(zip(cpu_minutes_by_epoch(row), row["val_cer"], strict=False))
    for (m0, c0), (m1, c1) in itertools.pairwise(points):
        if m0 <= minutes <= m1:
            return c0 + (c1 - c0) * (minutes - m0) / (m1 - m0)
    if points and abs(points[0][0] - minutes) < 1e-9:
        return points[0][1]
    return None


def frontier(rows: list[dict], marks: int = 6) -> list[tuple[float, dict[str, float | None]]]:
    """Dev CER of every arm at evenly spaced CPU-minute marks up to the longest arm's end: the accuracy each recipe
    buys for the same compute."""
    end = max(cpu_minutes_by_epoch(row)[-1] for row in rows)
    return [
        (end * k / marks, {row["arm"]: cer_at(row, end * k / marks) for row in rows})
        for k in range(1, marks + 1)
    ]


def print_tables(rows: list[dict], default: str) -> None:
    print("\n| arm | overrides | dev CER by epoch | s per epoch | wall s | CPU s | load |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['arm']} | {' '.join(row['set']) or '-'} | {', '.join(map(str, row['val_cer']))} | "
            f"{', '.join(map(str, row['epoch_seconds']))} | {row['wall_seconds']} | {row['cpu_seconds']} | "
            f"{row['load_average']} |"
        )
    names = [row["arm"] + ("*" if row["arm"] == default else "") for row in rows]
    print(
        f"\nThe frontier: dev CER at equal CPU-minutes (* {default}, params.yaml's recipe; - not reached)\n"
    )
    print("| CPU min | " + " | ".join(names) + " | best |")
    print("|---" * (len(rows) + 2) + "|")
    for minutes, cers in frontier(rows):
        reached = {arm: cer for arm, cer in cers.items() if cer is not None}
        best = min(reached, key=reached.get) if reached else "-"
        cells = ["-" if cers[row["arm"]] is None else f"{cers[row['arm']]:.2f}" for row in rows]
        print(f"| {minutes:.1f} | " + " | ".join(cells) + f" | {best} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument(
        "--arm", action="append", default=[], metavar="NAME=KEY=VALUE,KEY=VALUE",
        help="an arm: its name, then its config assignments (none: params.yaml's recipe)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("runs/recipe"))
    parser.add_argument(
        "--default", default="base", help="the arm that is params.yaml's recipe, marked * in the frontier"
    )
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="print the tables from --out's results.jsonl without training",
    )
    args = parser.parse_args()
    if args.table_only:
        rows = [json.loads(line) for line in (args.out / "results.jsonl").read_text().splitlines()]
        print_tables(rows, args.default)
        return 0
    if not args.arm:
        parser.error("name at least one --arm (or --table-only)")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for arm in args.arm:
        name, _, rest = arm.partition("=")
        # a comma starts the next assignment only before `key=`: values may be YAML lists ([1, 1, 2])
        assignments = [part for part in re.split(r",(?=[\w.]+=)", rest) if part]
        rows.append(run_arm(name, assignments, args.epochs, args.out, args.nproc))
        print(json.dumps(rows[-1]), flush=True)
    (args.out / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    print_tables(rows, args.default)
    return 0


if __name__ == "__main__":
    sys.exit(main())
