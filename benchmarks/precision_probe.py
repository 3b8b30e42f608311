"""Which module makes reduced-precision training drift from float32? The demo recipe trained side by side in
f32, bf16, and bf16 with one module family kept in float32 (attention, conv module, feed-forward, subsampling,
output projection), each in its own process; prints each run's loss curve ends and validation CER by epoch.

    python benchmarks/precision_probe.py --train .gpu/shards/train --val .gpu/shards/dev \
        --tokenizer data/03_tokenizer/tokenizer.model --out /tmp/probe [--device cuda] [--epochs 4]

On the CPU (CPU autocast bf16) one epoch of the 450-utterance demo subset takes ~2 minutes per run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

VARIANTS = {
    "f32": None,
    "bf16": None,
    "bf16-attn32": "attention",
    "bf16-conv32": "conv",
    "bf16-ff32": "ff",
    "bf16-sub32": "sub",
    "bf16-out32": "out",
}


def _in_float32(forward, device_type: str):
    def wrapped(self, *args, **kwargs):
        with torch.autocast(device_type, enabled=False):
            args = [a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args]
            return forward(self, *args, **kwargs)

    return wrapped


def keep_in_float32(kind: str | None, device_type: str) -> None:
    from torch import nn

    from asr_pipeline.modules.attention import RelPositionMultiHeadAttention
    from asr_pipeline.modules.convolution import ConvolutionModule
    from asr_pipeline.modules.feed_forward import FeedForward
    from asr_pipeline.modules.subsampling import DepthwiseSeparableConvSubsampling

    families = {
        "attention": RelPositionMultiHeadAttention,
        "conv": ConvolutionModule,
        "ff": FeedForward,
        "sub": DepthwiseSeparableConvSubsampling,
    }
    if kind in families:
        families[kind].forward = _in_float32(families[kind].forward, device_type)
    elif kind == "out":  # the CTC output projection: the model's only nn.Linear named "output"
        import dataclasses

        from asr_pipeline.models import registry

        spec = registry.get_spec("squeezeformer")
        build = spec.builder

        class Float32Output(nn.Module):
            def __init__(self, linear: nn.Linear) -> None:
                super().__init__()
                self.linear = linear

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                with torch.autocast(device_type, enabled=False):
                    return self.linear(x.float())

        def build_with_float32_output(config):
            model = build(config)
            model.output = Float32Output(model.output)
            return model

        registry.SPECS[spec.name] = dataclasses.replace(spec, builder=build_with_float32_output)


def run_one(name: str, args) -> None:
    keep_in_float32(VARIANTS[name], args.device)
    from asr_pipeline.training.config import resolve_config
    from asr_pipeline.training.worker import setup_distributed, train

    config = resolve_config(
        {
            "data": {"train_manifests": [args.train], "val_manifests": [args.val], "input_dim": 80,
                     "adaptive_batch_budget": 4000},
            "model": {"architecture": "squeezeformer", "variant": "demo"},
            "optim": {"epochs": args.epochs, "learning_rate": 2e-3, "lr_warmup_steps": 50},
            "run": {"output_dir": f"{args.out}/{name}", "tokenizer": args.tokenizer, "backend": args.device,
                    "precision": "f32" if name == "f32" else "bf16", "log_every": 10, "seed": args.seed,
                    "threads_per_rank": 1},
        }
    )  # fmt: skip
    train(config, setup_distributed(config))


def summary(out: Path, name: str) -> str:
    events = [json.loads(line) for line in (out / name / "events.jsonl").read_text().splitlines()]
    losses = [e["values"]["loss"] for e in events if e["type"] == "train"]
    cers = [round(e["values"]["val_cer"], 1) for e in events if e["type"] == "validation"]
    return f"{name:>12} loss {sum(losses[:3]) / 3:.3f} -> {sum(losses[-3:]) / 3:.3f}  val CER by epoch {cers}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--val", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process of one variant
    args = parser.parse_args()
    if args.one:
        run_one(args.one, args)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    children = {}
    for name in args.variants:
        log = open(out / f"{name}.log", "w")  # noqa: SIM115
        children[name] = (subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--one", name],
                                           stdout=log, stderr=subprocess.STDOUT), log)  # fmt: skip
    for name, (child, log) in children.items():
        if child.wait() != 0:
            print(f"{name}: exit {child.returncode}, see {log.name}")
        log.close()
    for name in args.variants:
        if (out / name / "events.jsonl").is_file():
            print(summary(out, name))


if __name__ == "__main__":
    main()
