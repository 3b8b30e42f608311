"""Fine-tuning step throughput and peak memory of pretrained-model shapes (issue 37), random weights.

Arms: full or LoRA (r=16 on the attention projections, ``hf_finetune.trainer.prepare_model``), with and without
gradient checkpointing, at the ``--precision`` (bf16 autocast on CUDA; f32 on the CPU). Each arm builds the
model from its config (no download: ``--size small`` is Whisper-small's shape, 242 M parameters; ``tiny`` the
tests' 45 k), then times ``--steps`` optimizer steps after ``--warmup`` on a batch of ``--batch`` 30 s windows
with ``--tokens``-token transcripts: forward, the loss of ``hf_finetune.loss``, backward, AdamW. Prints one
JSON line per arm: samples/s, ms/step, peak GPU memory (GiB; CPU: max RSS), with device and versions.

    .venv/bin/python benchmarks/bench_hf_finetune.py --size small --batch 16    # on a GPU
    .venv/bin/python benchmarks/bench_hf_finetune.py --size tiny --batch 4      # the tests' model, on the CPU
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time
from contextlib import nullcontext

import torch
import transformers

from asr_pipeline.hf_finetune.loss import next_token_loss
from asr_pipeline.hf_finetune.models import Pretrained, family_of
from asr_pipeline.hf_finetune.options import hf_finetune_options
from asr_pipeline.hf_finetune.trainer import autocast_dtype, pick_device, prepare_model
from asr_pipeline.training.optimizers import build_optimizer

SIZES = {  # WhisperConfig fields; small = openai/whisper-small's config.json
    "small": {"d_model": 768, "encoder_layers": 12, "decoder_layers": 12, "encoder_attention_heads": 12,
              "decoder_attention_heads": 12, "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072,
              "num_mel_bins": 80, "vocab_size": 51865, "max_source_positions": 1500, "max_target_positions": 448},
    "tiny": {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
             "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "num_mel_bins": 16,
             "vocab_size": 320, "max_source_positions": 200, "max_target_positions": 64},
}  # fmt: skip


def arm(size: str, method: str, checkpointing: bool, args: argparse.Namespace) -> dict:
    config = transformers.WhisperConfig(**SIZES[size], decoder_start_token_id=1, pad_token_id=0)
    options = hf_finetune_options({"model": f"whisper-{size}", "method": method, "gradient_checkpointing": checkpointing,
                                   "precision": args.precision, "device": args.device, "lora_dropout": 0.0})  # fmt: skip
    device, dtype = pick_device(options.device), None
    dtype = autocast_dtype(options.precision, device)
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration(config)
    event = prepare_model(Pretrained(model, None, None, family_of(config, f"whisper-{size}")), options)
    model.to(device).train()
    optimizer = build_optimizer("adamw", model, lr=1e-5, weight_decay=0.0)
    frames = 2 * config.max_source_positions
    features = torch.randn(args.batch, config.num_mel_bins, frames, device=device)  # (B, F, T)
    tokens = torch.randint(
        2, config.vocab_size, (args.batch, min(args.tokens, config.max_target_positions)), device=device
    )
    labels = tokens.clone()
    labels[:, :4] = -100  # the prompt
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    context = (lambda: torch.autocast(device.type, dtype)) if dtype else nullcontext
    times = []
    for step in range(args.warmup + args.steps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        with context():
            logits = model(input_features=features, decoder_input_ids=tokens).logits  # (B, L, V)
        loss, count = next_token_loss(logits, labels)
        (loss / count).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - started)
    seconds = sum(times) / len(times)
    peak = (torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)  # fmt: skip
    return {"size": size, "method": method, "gradient_checkpointing": checkpointing, "precision": str(dtype or "f32"),
            "batch": args.batch, "tokens": tokens.shape[1], "ms_per_step": round(1000 * seconds, 1),
            "samples_per_s": round(args.batch / seconds, 2), "peak_gib": round(peak, 2),
            "trainable_params": event["trainable_params"], "total_params": event["total_params"],
            "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
            "torch": torch.__version__, "transformers": transformers.__version__}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument(
        "--tokens", type=int, default=64, help="decoder tokens per utterance (prompt included)"
    )
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--precision", default="auto", choices=["auto", "f32", "bf16", "f16"])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    args = parser.parse_args()
    for method in ("full", "lora"):
        for checkpointing in (False, True):
            print(json.dumps(arm(args.size, method, checkpointing, args)), flush=True)
            torch.cuda.empty_cache() if torch.cuda.is_available() else None


if __name__ == "__main__":
    main()
