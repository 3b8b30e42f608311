"""Forward + backward time per audio second of each architecture at (nearly) equal parameter count.

One step = forward + float32 CTC loss + backward (no optimizer), on a synthetic batch of ``--batch``
utterances of ``--seconds`` seconds each (fbank: 100 frames/s of 80 bins; w2v-bert: 50 frames/s of 160),
targets at 12.5 tokens per second of a 257-piece vocabulary. Median of ``--steps`` after one warm-up
step (three on CUDA, timed with CUDA events). Reported: seconds of compute per second of audio, and the
ratio to Squeezeformer measured in the same run.

Two sizes, each matched to Squeezeformer's named size within a few percent (the table prints the counts):
    demo     ~3.7 M: squeezeformer demo, zipformer demo with narrower stacks, w2v-bert demo
    medium   ~62 M: squeezeformer m widened to 340, zipformer m, w2v-bert 512 wide and 10 layers deep

    .venv/bin/python benchmarks/bench_architectures.py                 # demo size, this machine's device
    .venv/bin/python benchmarks/bench_architectures.py --sizes demo medium --steps 10
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics

os.environ.pop("TRITON_INTERPRET", None)  # time compiled kernels, never the interpreter

import torch
import torch.nn.functional as F

# The frame rates, target density, vocabulary and timers the training-step benchmarks share.
from training_step import FRAME_SEC, TOKENS_PER_SEC, VOCAB_SIZE, time_calls

from asr_pipeline.models.registry import build_model, default_input_dim, frontend_of

# (architecture, variant, config overrides) per size; the overrides bring a model to the size's count.
MODELS = {
    "demo": [
        ("squeezeformer", "demo", {}),  # 3.69 M
        (  # 3.62 M: demo's stacks narrowed from 96-160 to 96-128 channels, its FFNs to 256-416
            "zipformer",
            "demo",
            {
                "encoder_dim": (96, 96, 112, 128, 112, 96),
                "encoder_unmasked_dim": (96,) * 6,
                "feedforward_dim": (256, 288, 320, 416, 320, 288),
            },
        ),
        ("w2v-bert", "demo", {}),  # 3.66 M
    ],
    "medium": [
        ("squeezeformer", "m", {"d_model": 340}),  # the paper's M (324 wide, 55.7 M) widened to 61 M
        ("zipformer", "m", {}),  # icefall's M: 64.1 M
        # 60.8 M
        ("w2v-bert", None, {"d_model": 512, "num_layers": 10, "num_heads": 8, "intermediate_size": 2048}),
    ],
}


def synthetic_batch(architecture: str, batch: int, seconds: float, device: torch.device) -> dict:
    generator = torch.Generator().manual_seed(0)
    frames = round(seconds / FRAME_SEC[frontend_of(architecture)])
    tokens = round(seconds * TOKENS_PER_SEC)
    return {
        "features": torch.randn(batch, frames, default_input_dim(architecture), generator=generator).to(
            device
        ),
        "lengths": torch.full((batch,), frames, dtype=torch.long, device=device),
        "targets": torch.randint(1, VOCAB_SIZE, (batch, tokens), generator=generator).to(device),
        "target_lengths": torch.full((batch,), tokens, dtype=torch.long, device=device),
    }


def forward_backward(model: torch.nn.Module, batch: dict) -> None:
    log_probs, out_lengths = model(batch["features"], batch["lengths"])  # (B, T', V), (B,)
    loss = F.ctc_loss(
        log_probs.transpose(0, 1), batch["targets"], out_lengths, batch["target_lengths"], zero_infinity=True
    )
    loss.backward()
    model.zero_grad(set_to_none=True)


def median_seconds(fn, device: torch.device, steps: int) -> tuple[float, float]:
    """(median, relative spread) of ``fn``'s wall time over ``steps`` calls after warm-up."""
    times = time_calls(fn, device, warmup=3 if device.type == "cuda" else 1, repeats=steps)
    middle = statistics.median(times)
    return middle, (max(times) - min(times)) / middle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=list(MODELS), default=["demo"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=6.0, help="length of every utterance")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    where = (
        torch.cuda.get_device_name() if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    )
    print(f"device: {where}; torch {torch.__version__}; {args.batch} x {args.seconds:g} s per step, f32")
    header = f"{'size':>6} {'architecture':>13} {'variant':>7} {'Mparam':>7} | {'step s':>7} {'spread':>6} | "
    header += f"{'s per audio s':>13} {'vs squeezeformer':>16}"
    rows = []
    for size in args.sizes:
        baseline = None
        for architecture, variant, overrides in MODELS[size]:
            torch.manual_seed(0)
            model = build_model(
                architecture,
                variant,
                input_dim=default_input_dim(architecture),
                vocab_size=VOCAB_SIZE,
                dropout=0.0,
                **overrides,
            ).to(device)
            params = sum(p.numel() for p in model.parameters()) / 1e6
            batch = synthetic_batch(architecture, args.batch, args.seconds, device)
            step, spread = median_seconds(
                functools.partial(forward_backward, model, batch), device, args.steps
            )
            per_audio_second = step / (args.batch * args.seconds)
            baseline = baseline or per_audio_second
            rows.append(
                f"{size:>6} {architecture:>13} {variant or '-':>7} {params:7.2f} | {step:7.3f} {spread:6.2f} | "
                f"{per_audio_second:13.5f} {per_audio_second / baseline:16.2f}"
            )
            print(rows[-1], flush=True)
            del model
    print(header)
    print("-" * len(header))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
