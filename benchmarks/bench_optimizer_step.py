"""The optimizer step on a model's parameters: AdamW as torch's per-tensor loop, foreach and fused, and
ScaledAdam (Zipformer's; "segmented": its sums of products as on CUDA; "told": segmented and told the
skip verdict as a tensor, the trainer's way on CUDA), side by side: the step's time here
and the aten ops it dispatches.

    python benchmarks/bench_optimizer_step.py --architecture zipformer --variant demo --threads 1
    python benchmarks/bench_optimizer_step.py --variant m --rounds 6     # Zipformer-M: the GPU's question
    python benchmarks/bench_optimizer_step.py --variant m --rounds 8 --vocab-size 500 --device cuda

Random gradients, one step per optimizer in turn (interleaved), the first two rounds dropped. The aten ops
of one more step are counted (a ``TorchDispatchMode``): on a GPU each is at least one kernel launch, so
the count is what a step of Python-level ops (the per-tensor loops, ScaledAdam) asks of the CPU there,
whatever this machine's time says. A foreach op counts once per tensor here (the CPU's fallback) but is
one multi-tensor launch or a few on CUDA. Training builds its optimizers through
``training.optimizers.build_optimizer`` (AdamW fused on CPU and CUDA).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from asr_pipeline.models.registry import build_model
from asr_pipeline.training.config import OptimConfig
from asr_pipeline.training.optimizers import build_optimizer, decay_groups

ADAMW = {"per-tensor": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


class DispatchedOps(TorchDispatchMode):
    """Counts the aten ops dispatched under it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def main(argv: list[str] | None = None) -> dict[str, int]:
    """Prints the table; returns each optimizer's aten ops a step."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--architecture", default="zipformer")
    parser.add_argument("--variant", default="demo")
    parser.add_argument("--input-dim", type=int, default=80)
    parser.add_argument("--vocab-size", type=int, default=49)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (a step timed to its end on the device)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model = build_model(args.architecture, args.variant, input_dim=args.input_dim, vocab_size=args.vocab_size)
    model.to(device)
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter) * 1e-3
    decay = OptimConfig().weight_decay
    optimizers = {
        f"adamw {name}": torch.optim.AdamW(decay_groups(model, decay), lr=1e-3, **options)
        for name, options in ADAMW.items()
    }
    optimizers["scaled_adam"] = build_optimizer("scaled_adam", model, lr=0.045, weight_decay=decay)
    # CUDA's way of each tensor's sum(p * g) (one segmented reduction), timed and counted here too
    optimizers["scaled_adam segmented"] = build_optimizer("scaled_adam", model, lr=0.045, weight_decay=decay)
    optimizers["scaled_adam segmented"].segmented_sums = True  # type: ignore[attr-defined]
    # The trainer's way on CUDA: segmented, told the skip verdict as a tensor (found_inf), no read back
    optimizers["scaled_adam told"] = build_optimizer("scaled_adam", model, lr=0.045, weight_decay=decay)
    optimizers["scaled_adam told"].segmented_sums = True  # type: ignore[attr-defined]
    optimizers["scaled_adam told"].device_skip = True  # type: ignore[attr-defined]
    verdict = torch.zeros((), device=device)  # 0.0: take the step
    times: dict[str, list[float]] = {name: [] for name in optimizers}
    for _ in range(args.rounds):
        for name, optimizer in optimizers.items():
            _wait(device)
            start = time.perf_counter()
            _step(optimizer, verdict)
            _wait(device)
            times[name].append(time.perf_counter() - start)
    ops = {}
    for name, optimizer in optimizers.items():
        with DispatchedOps() as counted:
            _step(optimizer, verdict)
        ops[name] = counted.count
    tensors = sum(1 for _ in model.parameters())
    numel = sum(p.numel() for p in model.parameters())
    on = f"{args.threads} thread(s)" if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(f"{args.architecture}-{args.variant}: {tensors} tensors, {numel:,} parameters, {on}")
    base = statistics.median(times["adamw fused"][2:])
    for name, values in times.items():
        median = statistics.median(values[2:])
        print(
            f"{name:>21}: median {1000 * median:.1f} ms, best {1000 * min(values[2:]):.1f} ms, "
            f"x{median / base:.2f} of fused | {ops[name]:,} aten ops a step"
        )
    return ops


def _step(optimizer: torch.optim.Optimizer, verdict: torch.Tensor) -> None:
    """One step; an optimizer that takes the verdict on the device is told it, as the trainer tells it."""
    if getattr(optimizer, "device_skip", False):
        optimizer.found_inf = verdict  # type: ignore[attr-defined]
    try:
        optimizer.step()
    finally:
        optimizer.__dict__.pop("found_inf", None)


def _wait(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


if __name__ == "__main__":
    main()
