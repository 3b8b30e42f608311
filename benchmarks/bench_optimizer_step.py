"""AdamW step time on a model's parameters: torch's per-tensor loop, foreach and fused, side by side.

    python benchmarks/bench_optimizer_step.py --architecture zipformer --variant demo --threads 1

Random gradients, one step per implementation in turn (interleaved), the first two rounds dropped.
Training builds its AdamW through ``training.optimization.adamw`` (fused on CPU and CUDA).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from asr_pipeline.models.registry import build_model
from asr_pipeline.training.optimization import decay_groups

VARIANTS = {"per-tensor": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--architecture", default="zipformer")
    parser.add_argument("--variant", default="demo")
    parser.add_argument("--input-dim", type=int, default=80)
    parser.add_argument("--vocab-size", type=int, default=49)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = build_model(args.architecture, args.variant, input_dim=args.input_dim, vocab_size=args.vocab_size)
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter)
    optimizers = {
        name: torch.optim.AdamW(decay_groups(model, 5e-4), lr=1e-3, **options)
        for name, options in VARIANTS.items()
    }
    times: dict[str, list[float]] = {name: [] for name in optimizers}
    for _ in range(args.rounds):
        for name, optimizer in optimizers.items():
            start = time.perf_counter()
            optimizer.step()
            times[name].append(time.perf_counter() - start)
    tensors = sum(1 for _ in model.parameters())
    numel = sum(p.numel() for p in model.parameters())
    print(
        f"{args.architecture}-{args.variant}: {tensors} tensors, {numel:,} parameters, {args.threads} thread(s)"
    )
    base = statistics.median(times["per-tensor"][2:])
    for name, values in times.items():
        median = statistics.median(values[2:])
        print(
            f"{name:>10}: median {1000 * median:.1f} ms, best {1000 * min(values[2:]):.1f} ms, x{median / base:.2f}"
        )


if __name__ == "__main__":
    main()
