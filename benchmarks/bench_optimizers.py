"""AdamW against ScaledAdam + Eden on the demo at equal CPU-minutes: dev CER after each epoch and its seconds.

Both arms are `asr-pipeline train` on the demo's shards with params.yaml ``train`` (the demo Zipformer unless
``--variant``; adaptive batches of 4,000 frames), as ``benchmarks/demo_recipe.py`` builds an arm's command,
run side by side for the same wall-clock budget (``--minutes``) and then stopped; each validates the dev set every
``--validate-every`` optimizer steps (and after each epoch), so CER is read at equal minutes of the same shared
CPUs:

- ``adamw``: the recipe as it is (AdamW at 2e-3, linear warmup 200 steps, hold 500, polynomial decay);
- ``scaled_adam_eden``: ``optim.optimizer=scaled_adam`` at icefall's Zipformer rate 0.045 (ScaledAdam's rate is
  the relative change per step) with ``optim.lr_decay_kind=eden``; Eden's ``lr_batches`` is scaled from icefall's
  7,500 (for epochs of thousands of steps) to 500 for the demo's ~117 steps per epoch, its warmup is the recipe's
  200 steps, ``lr_epochs`` is icefall's 3.5.

Equal CPU-minutes: the arms run at the same time on the same cores, so a slower optimizer step (ScaledAdam steps
the demo Zipformer's 416 tensors one by one in Python, ~130 ms against fused AdamW's ~16 ms on one core) is paid
for in steps not taken. The machine's load average is reported.

    .venv/bin/python benchmarks/bench_optimizers.py --minutes 12 --variant tiny --out runs/bench_optimizers
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo_recipe import base_config  # the sibling script's config: one way to describe the demo's run

ARMS = {
    "adamw": [],
    "scaled_adam_eden": [
        "optim.optimizer=scaled_adam",
        "optim.learning_rate=0.045",
        "optim.lr_decay_kind=eden",
        "optim.lr_eden_batches=500",
        "optim.lr_eden_epochs=3.5",
    ],
}


def start_arm(name: str, assignments: list[str], config: Path, out: Path, args) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "asr_pipeline.cli", "train", "--config", str(config),
        "--output-dir", str(out / name), "--overwrite-output-dir", "--epochs", str(args.epochs),
        "--nproc-per-node", str(args.nproc), "--no-dvclive",
        "--set", f"validation.every_steps={args.validate_every}",
        *(part for assignment in assignments for part in ("--set", assignment)),
    ]  # fmt: skip
    # Its own session: stopping the arm stops torchrun and its workers with it.
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, start_new_session=True)


def read_arm(name: str, assignments: list[str], run_dir: Path, started: float) -> dict:
    events = [
        json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()
    ]
    validations = [e for e in events if e["type"] == "validation" and "val_cer" in e["values"]]
    steps = max((e["step"] for e in events), default=0)
    return {
        "arm": name,
        "set": assignments,
        "val_cer": [
            (e["step"], round((e["time"] - started) / 60, 1), round(e["values"]["val_cer"], 2))
            for e in validations
        ],
        "steps": steps,
        "load_average": round(os.getloadavg()[0], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=12.0, help="wall-clock budget of both arms")
    parser.add_argument("--epochs", type=int, default=10, help="an upper bound; the budget stops the arms")
    parser.add_argument("--validate-every", type=int, default=40, help="optimizer steps between dev scorings")
    parser.add_argument("--nproc", type=int, default=1, help="training processes per arm")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument(
        "--variant", default=None, help="the Zipformer size for both arms (default: params.yaml's, demo)"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench_optimizers"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    config = base_config(args.out)
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    arms = {
        name: ARMS[name] + ([f"model.variant={args.variant}"] if args.variant else [])
        for name in args.arms.split(",")
    }
    started = time.time()
    processes = {
        name: start_arm(name, assignments, config, args.out, args) for name, assignments in arms.items()
    }
    deadline = time.monotonic() + args.minutes * 60
    while time.monotonic() < deadline and any(p.poll() is None for p in processes.values()):
        time.sleep(5)
    for process in processes.values():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes.values():
        process.wait()
    rows = [read_arm(name, assignments, args.out / name, started) for name, assignments in arms.items()]
    (args.out / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(
        f"{date}; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
        f"torch {torch.__version__}, Python {platform.python_version()}, {args.nproc} process(es) per arm, "
        f"arms side by side for {args.minutes:g} min"
    )
    print("\n| arm | overrides | dev CER (step, minute) | steps in budget | load |")
    print("|---|---|---|---|---|")
    for row in rows:
        cer = ", ".join(f"{cer} ({step}, {minute})" for step, minute, cer in row["val_cer"]) or "none yet"
        print(
            f"| {row['arm']} | {' '.join(row['set']) or '-'} | {cer} | {row['steps']} | {row['load_average']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
