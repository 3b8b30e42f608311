"""Decoding on GPU-produced log-probs: the same text as on the CPU? One trained run's model over feature
shards on the CPU (float32, the reference), on CUDA in float32 (TF32 off) and on CUDA under bf16
autocast; each set of log-probs decoded greedily and by CTC prefix beam search (+ KenLM when ``--lm``).

Prints, per device/precision: the largest log-prob difference from the CPU's, the share of utterances
whose text equals the CPU's text for the same decoder, WER/CER, and the time to produce the log-probs
and to decode them.

    python benchmarks/gpu_decode_parity.py --run-dir runs/gpu_smoke/squeezeformer-f32-single \
        --shards data/04_features/test --lm data/06_lm/lm.binary --beam-width 16 --lm-weight 0.5 --word-bonus 4
"""

from __future__ import annotations

import argparse
import glob
import os
import time
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)

import torch

from asr_pipeline.decoding.beam_search import CTCPrefixBeamSearch, load_lm
from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.inference import iter_log_probs
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.text.tokenizer import CTCTokenizer


def log_probs_on(model, shards: list[str], device: str, dtype: torch.dtype | None, batch_size: int):
    model = model.to(device)
    started = time.perf_counter()
    outputs = list(iter_log_probs(model, shards, batch_size=batch_size, autocast_dtype=dtype))
    return outputs, time.perf_counter() - started


def decode(outputs, tokenizer: CTCTokenizer, searcher: CTCPrefixBeamSearch) -> tuple[dict, float]:
    started = time.perf_counter()
    texts: dict[str, list[str]] = {"greedy": [], "beam": []}
    for batch in outputs:
        greedy = greedy_decode(batch.log_probs, batch.lengths, blank_id=tokenizer.blank_id)
        texts["greedy"] += [tokenizer.decode(ids) for ids in greedy]
        texts["beam"] += [
            nbest[0].text if nbest else "" for nbest in searcher.decode_batch(batch.log_probs, batch.lengths)
        ]
    return texts, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--shards", required=True, help="a shard or a folder of shards")
    parser.add_argument("--lm")
    parser.add_argument("--beam-width", type=int, default=16)
    parser.add_argument("--lm-weight", type=float, default=0.5)
    parser.add_argument("--word-bonus", type=float, default=4.0)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    shards = (
        sorted(glob.glob(str(Path(args.shards) / "*.parquet")))
        if Path(args.shards).is_dir()
        else [args.shards]
    )
    run = load_run_model(args.run_dir)
    model = run.model
    tokenizer = CTCTokenizer.from_file(Path(args.run_dir) / "tokenizer.model", blank_id=run.blank_id)
    lm = load_lm(args.lm) if args.lm else None
    options = DecodingOptions(
        decoder="prefix_beam",
        beam_width=args.beam_width,
        lm_weight=args.lm_weight,
        word_score=args.word_bonus,
    )
    searcher = CTCPrefixBeamSearch(options, tokenizer, lm)
    cases = [("cpu", "cpu", None)]
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        cases += [("cuda f32", "cuda", None), ("cuda bf16", "cuda", torch.bfloat16)]
        log_probs_on(model, shards[:1], "cuda", None, args.batch_size)  # warm-up: CUDA context, cuDNN
    results = {}
    for name, device, dtype in cases:
        outputs, forward_sec = log_probs_on(model, shards, device, dtype, args.batch_size)
        texts, decode_sec = decode(outputs, tokenizer, searcher)
        results[name] = (outputs, texts, forward_sec, decode_sec)
    references = [text for batch in results["cpu"][0] for text in batch.texts]
    cpu_outputs, cpu_texts = results["cpu"][0], results["cpu"][1]
    beam = f"beam {args.beam_width}" + (" + LM" if lm else "")
    print(f"{len(references)} utterances of {args.shards}; run {args.run_dir}")
    header = (
        f"{'log-probs':>10} | {'max |dlogp|':>11} | {'greedy = cpu':>12} {beam + ' = cpu':>18} | "
        f"{'greedy WER/CER':>14} {beam + ' WER/CER':>22} | {'fwd s':>6} {'decode s':>8}"
    )
    print(header)
    print("-" * len(header))
    for name, (outputs, texts, forward_sec, decode_sec) in results.items():
        diff = max(
            float((a.log_probs - b.log_probs).abs().max()) for a, b in zip(outputs, cpu_outputs, strict=True)
        )
        same = {
            method: sum(x == y for x, y in zip(texts[method], cpu_texts[method], strict=True))
            / len(references)
            for method in ("greedy", "beam")
        }
        greedy_rates, beam_rates = (
            error_rates(references, texts["greedy"]),
            error_rates(references, texts["beam"]),
        )
        print(
            f"{name:>10} | {diff:11.2e} | {same['greedy']:12.1%} {same['beam']:18.1%} | "
            f"{greedy_rates.wer:6.2f}/{greedy_rates.cer:<7.2f} {beam_rates.wer:14.2f}/{beam_rates.cer:<7.2f} | "
            f"{forward_sec:6.2f} {decode_sec:8.2f}"
        )


if __name__ == "__main__":
    main()
