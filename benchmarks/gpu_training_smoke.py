"""CUDA training smoke: each architecture (``--architectures``; those of the shards' frontend) x precision
(f32, bf16, f16) x launch (one process, torchrun with ``--device-indices 0``) trains a few hundred steps on real demo shards, then resumes from its
checkpoint for more epochs. All runs go concurrently on the one GPU (each is small), then each run's
``events.jsonl`` is checked:

- the loss falls: the mean of the last 3 train events is under half the mean of the first 3;
- the scaler settles: no step is skipped after the first ``--settle-steps`` (f16's GradScaler halves its
  initial 2^16 scale on the first overflows; f32/bf16 must skip none at all);
- resume works on CUDA: the resumed phase starts at the step the first phase ended on, and ends with
  as many steps as the epochs plan.

    python benchmarks/gpu_training_smoke.py --train data/04_features/train --val data/04_features/dev \
        --tokenizer data/03_tokenizer/tokenizer.model --out runs/gpu_smoke

Exit status 1 if any check fails. Needs CUDA.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import torch

from asr_pipeline.models.registry import architecture_names, frontend_of

PRECISIONS = ["f32", "bf16", "f16"]
LAUNCHES = ["single", "torchrun"]


def train_command(args, run_dir: Path, architecture: str, precision: str, launch: str, epochs: int,
                  resume: bool) -> list[str]:  # fmt: skip
    command = [
        sys.executable, "-m", "asr_pipeline.cli", "train",
        "--train-manifest", args.train, "--val-manifest", args.val, "--tokenizer", args.tokenizer,
        "--architecture", architecture, "--variant", args.variant, "--epochs", str(epochs),
        "--backend", "cuda", "--precision", precision, "--output-dir", str(run_dir),
        "--adaptive-batch-budget", str(args.budget), "--lr-warmup-steps", "50", "--learning-rate", "2e-3",
        "--log-every", "10", "--seed", "0", "--num-workers", "2", "--no-dvclive",
    ]  # fmt: skip
    command += ["--device-indices", "0"] if launch == "torchrun" else ["--device-index", "0"]
    if resume:
        command += ["--resume-from", str(run_dir)]
    return command


def events(run_dir: Path) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def check_run(run_dir: Path, precision: str, first_epochs: int, settle_steps: int) -> dict:
    log = events(run_dir)
    train = [e for e in log if e["type"] == "train"]
    epoch_ends = [e for e in log if e["type"] == "epoch"]
    losses = [e["values"]["loss"] for e in train]
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    skipped = [(e["step"], e["values"]["skipped_steps"]) for e in train]
    settled = [count for step, count in skipped if step >= settle_steps]
    late_skips = (settled[-1] - settled[0]) if settled else 0
    if precision != "f16":
        late_skips = skipped[-1][1] if skipped else 0
    phase1_end = epoch_ends[first_epochs - 1]["step"]
    resumed = [e for e in log if e["type"] == "data"][1:]  # the second "data" event opens the resumed phase
    validation = [e for e in log if e["type"] == "validation"]
    summary = next(e for e in reversed(log) if e["type"] == "summary")
    checks = {
        "loss_falls": last < 0.5 * first,
        "no_late_skips": late_skips == 0,
        "resumed_at_phase_end": bool(resumed) and resumed[0]["step"] == phase1_end,
        "finite": all(map(math.isfinite, losses)),
    }
    return {
        "run": run_dir.name,
        "steps": summary["step"],
        "first_loss": first,
        "last_loss": last,
        "skipped_total": skipped[-1][1] if skipped else 0,
        "late_skips": late_skips,
        "phase1_steps": phase1_end,
        "val_cer": validation[-1]["values"]["val_cer"] if validation else None,
        "audio_s_per_s": train[-1]["values"]["audio_seconds_per_sec"],
        "wall_sec": summary["values"].get("wall_sec"),
        **checks,
        "ok": all(checks.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--val", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", default="runs/gpu_smoke")
    parser.add_argument("--variant", default="demo")
    parser.add_argument("--budget", type=int, default=4000, help="padded frames per batch")
    parser.add_argument("--epochs", type=int, default=8, help="after the resume")
    parser.add_argument("--first-epochs", type=int, default=4, help="before the resume")
    parser.add_argument("--settle-steps", type=int, default=50)
    parser.add_argument(
        "--architectures",
        nargs="+",
        default=[name for name in architecture_names() if frontend_of(name) == "fbank"],
        help="default: those that eat fbank shards (w2v-bert needs 160-dim ones)",
    )
    parser.add_argument("--launches", nargs="+", choices=LAUNCHES, default=LAUNCHES)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs CUDA")
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = [(a, p, l) for a in args.architectures for p in PRECISIONS for l in args.launches]  # noqa: E741
    for resume, epochs in [(False, args.first_epochs), (True, args.epochs)]:
        procs = {}
        for architecture, precision, launch in runs:
            run_dir = out / f"{architecture}-{precision}-{launch}"
            log = open(out / f"{run_dir.name}.{'resume' if resume else 'first'}.log", "w")  # noqa: SIM115
            command = train_command(args, run_dir, architecture, precision, launch, epochs, resume)
            procs[run_dir] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log)
        for run_dir, (proc, log) in procs.items():
            if proc.wait() != 0:
                print(f"{run_dir.name}: exit {proc.returncode}; see {log.name}")
            log.close()
    rows = []
    for architecture, precision, launch in runs:
        run_dir = out / f"{architecture}-{precision}-{launch}"
        try:
            rows.append(check_run(run_dir, precision, args.first_epochs, args.settle_steps))
        except (OSError, StopIteration, IndexError, KeyError) as error:
            rows.append({"run": run_dir.name, "ok": False, "error": repr(error)})
    (out / "smoke.json").write_text(json.dumps(rows, indent=1))
    print(f"{'run':>30} {'steps':>5} {'loss first->last':>17} {'skips':>5} {'late':>4} {'resume@':>7} "
          f"{'val CER':>7} {'audio s/s':>9} ok")  # fmt: skip
    for r in rows:
        if "error" in r:
            print(f"{r['run']:>30} ERROR {r['error']}")
            continue
        print(
            f"{r['run']:>30} {r['steps']:>5} {r['first_loss']:8.2f}->{r['last_loss']:<8.2f} "
            f"{r['skipped_total']:>5} {r['late_skips']:>4} {r['phase1_steps']:>7} "
            f"{r['val_cer'] if r['val_cer'] is None else round(r['val_cer'], 1)!s:>7} "
            f"{r['audio_s_per_s']:9.0f} {'yes' if r['ok'] else 'NO'}"
        )
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
