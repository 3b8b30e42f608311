"""HuBERT fine-tuning for ASR against the same model trained from scratch (issue 15, item 7): arms that differ
only in where their weights start and what stays frozen, trained side by side through ``asr-pipeline train``
with one budget (epochs, schedule, batches), then decoded greedily on the test shards with their best
checkpoints (``asr-pipeline decode``).

    python benchmarks/hubert_finetune_arms.py --train .../train --dev .../dev --test .../test \
        --tokenizer tokenizer.model --init data/11_hubert/it1/validation/best.safetensors \
        --out runs/hubert_arms --epochs 20 --backend cuda

Arms (``--arms``): ``ft-frozen-cnn`` starts from ``--init`` with the waveform CNN frozen all run (fairseq's
fine-tuning recipe), ``ft`` starts from ``--init`` with everything training, ``scratch`` starts from random
weights. Prints one row per arm (best dev CER, its epoch, test greedy CER/WER) and writes ``arms.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from asr_pipeline.training.events import EVENTS_FILE, read_events

ARMS = {
    "ft-frozen-cnn": {"init": True, "flags": ["--freeze-frontend"]},
    "ft": {"init": True, "flags": []},
    "scratch": {"init": False, "flags": []},
}


def train_command(args: argparse.Namespace, arm: str, run_dir: Path) -> list[str]:
    spec = ARMS[arm]
    command = [
        sys.executable, "-m", "asr_pipeline.cli", "train",
        "--train-manifest", args.train, "--val-manifest", args.dev, "--tokenizer", args.tokenizer,
        "--architecture", "hubert", "--variant", args.variant, "--input-dim", "320",
        "--epochs", str(args.epochs), "--learning-rate", str(args.learning_rate),
        "--lr-warmup-steps", str(args.warmup_steps), "--lr-hold-steps", str(args.hold_steps),
        "--adaptive-batch-budget", str(args.batch_budget), "--adaptive-batch-max-samples", "16",
        "--backend", args.backend, "--precision", args.precision, "--num-workers", str(args.workers),
        "--output-dir", str(run_dir), "--no-dvclive", "--seed", str(args.seed),
    ]  # fmt: skip
    if args.max_train_samples is not None:
        command += ["--max-train-samples", str(args.max_train_samples)]
    if spec["init"]:
        command += ["--init-from", args.init]
    return command + spec["flags"]


def best_dev(run_dir: Path) -> tuple[float | None, int | None]:
    """The lowest validation CER of the run's epochs and its epoch (events.jsonl)."""
    if not (run_dir / EVENTS_FILE).exists():
        return None, None
    scores = [
        (e["values"]["val_cer"], e["epoch"])
        for e in read_events(run_dir, "validation")
        if "val_cer" in e["values"]
    ]
    return min(scores, default=(None, None))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name in ("--train", "--dev", "--test", "--tokenizer", "--init"):
        parser.add_argument(name, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--arms", nargs="+", choices=sorted(ARMS), default=list(ARMS))
    parser.add_argument("--variant", default="demo")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--warmup-steps", type=int, default=300)
    parser.add_argument("--hold-steps", type=int, default=1200)
    parser.add_argument("--batch-budget", type=int, default=3000, help="padded 20 ms frames per batch")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--precision", default="f32")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-train-samples", type=int, help="a smoke run's subset of --train")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds before the arms are stopped")
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    processes = {}
    for arm in args.arms:
        with (args.out / f"{arm}.log").open("w") as log:  # the child keeps its own copy of the handle
            processes[arm] = subprocess.Popen(
                train_command(args, arm, args.out / arm), stdout=log, stderr=subprocess.STDOUT
            )
    results = {}
    for arm, process in processes.items():
        try:
            remaining = None if args.time_limit is None else max(1.0, args.time_limit - (time.time() - start))
            code = process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            process.terminate()
            code = process.wait()
        results[arm] = {"exit": code, "train_s": round(time.time() - start, 1)}
    for arm in args.arms:
        run_dir = args.out / arm
        dev_cer, dev_epoch = best_dev(run_dir)
        row = {**results[arm], "best_dev_cer": dev_cer, "best_epoch": dev_epoch}
        if (run_dir / "checkpoint_best.json").exists():
            decoded = subprocess.run(
                [sys.executable, "-m", "asr_pipeline.cli", "decode", "--run-dir", str(run_dir), "--input", args.test,
                 "--checkpoint", "best", "--decoder", "greedy", "--tokenizer", args.tokenizer],
                capture_output=True, text=True,
            )  # fmt: skip
            if decoded.returncode == 0:
                row["test"] = json.loads(decoded.stdout)
            else:
                row["decode_error"] = decoded.stderr[-2000:]
        metrics = run_dir / "metrics.json"
        if metrics.exists():
            row["metrics"] = json.loads(metrics.read_text())
        results[arm] = row
    (args.out / "arms.json").write_text(json.dumps(results, indent=2))
    print(f"{'arm':<14} {'exit':>4} {'train s':>8} {'best dev CER':>12} {'epoch':>5}  test greedy")
    for arm, row in results.items():
        print(
            f"{arm:<14} {row['exit']:>4} {row['train_s']:>8} {row['best_dev_cer']!s:>12} {row['best_epoch']!s:>5}  "
            f"{json.dumps(row.get('test', row.get('decode_error', '-')))[:200]}"
        )


if __name__ == "__main__":
    main()
