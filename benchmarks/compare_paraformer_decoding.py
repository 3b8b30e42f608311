"""Paraformer's one parallel pass against CTC decoding, side by side on the same test shards: WER/CER and the
real-time factor (seconds of compute per second of audio, model forward + search, one thread).

Rows: the Paraformer run (its encoder, CIF predictor and one non-autoregressive decoder pass; the refinement
pass too when the run is enhanced) decoded per token; a CTC run (the demo's) decoded greedily and with the
flashlight lexicon beam search + word KenLM (tuned weights of ``data/08_tuning/decoding.json`` when present).
Each variant decodes the whole split ``--repeats`` times in rotated order; the best pass counts (the machine is
shared; the fastest pass is the least disturbed).

    python benchmarks/compare_paraformer_decoding.py --paraformer runs/paraformer-demo   # after `make demo`
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

from asr_pipeline.decoding.decoders import DecodingResources
from asr_pipeline.decoding.evaluation import greedy_decoder, load_run, run_log_probs
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.io.shards import iter_examples
from asr_pipeline.text.tokenizer import CTCTokenizer

DATA = Path("data")
FRAME_SEC = 0.01  # fbank hop


def split_seconds(shards: list[str]) -> float:
    return sum(example["rows"] for shard in shards for example in iter_examples(shard)) * FRAME_SEC


def decode_split(run, decoder, shards: list[str], batch_size: int) -> tuple[list[str], list[str], float]:
    """References, hypotheses and wall seconds of model forward + decoding over the whole split."""
    references, hypotheses = [], []
    started = time.perf_counter()
    for batch in run_log_probs(run, shards, batch_size):
        for n_best in decoder.decode_batch(batch.log_probs, batch.lengths):
            hypotheses.append(n_best[0].text if n_best else "")
        references.extend(batch.texts)
    return references, hypotheses, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paraformer", required=True, help="a Paraformer run dir")
    parser.add_argument("--ctc", default=str(DATA / "07_train" / "run"), help="a CTC run dir (the demo's)")
    parser.add_argument("--split", default="test", help="data/04_features/<split>")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(1)

    shards = sorted(str(p) for p in (DATA / "04_features" / args.split).glob("*.parquet"))
    audio_sec = split_seconds(shards)
    paraformer, ctc = load_run(args.paraformer), load_run(args.ctc)
    tokenizer = CTCTokenizer.from_file(Path(args.ctc) / "tokenizer.model")
    tuned_path = DATA / "08_tuning" / "decoding.json"
    tuned = json.loads(tuned_path.read_text()).get("lexicon", {}) if tuned_path.is_file() else {}
    lexicon_options = DecodingOptions.from_dict({"decoder": "lexicon", **tuned}, "tuned lexicon")
    resources = DecodingResources(
        word_lm=DATA / "06_lm" / "lm.binary", token_lm=None, lexicon=DATA / "03_tokenizer" / "lexicon.txt"
    )
    variants: dict[str, tuple[object, Callable]] = {
        f"paraformer ({paraformer.model_config.get('alignment_mode', 'cif')}"
        f"{', enhanced' if paraformer.model_config.get('enhanced') else ''}), one parallel pass": (
            paraformer,
            greedy_decoder(paraformer, tokenizer),
        ),
        "ctc greedy": (ctc, greedy_decoder(ctc, tokenizer)),
        "ctc lexicon beam + word LM": (ctc, resources.build(lexicon_options, tokenizer)),
    }
    best: dict[str, float] = {}
    scores: dict[str, tuple[float, float]] = {}
    names = list(variants)
    for repeat in range(args.repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            run, decoder = variants[name]
            references, hypotheses, seconds = decode_split(run, decoder, shards, args.batch_size)
            best[name] = min(best.get(name, float("inf")), seconds)
            rates = error_rates(references, hypotheses)
            scores[name] = (rates.wer, rates.cer)
    print(
        f"{args.split}: {audio_sec / 3600:.3f} h of audio, batch {args.batch_size}, 1 thread, best of {args.repeats}"
    )
    print(f"{'variant':<52} {'WER %':>7} {'CER %':>7} {'RTF':>8} {'vs paraformer':>14}")
    base = next(iter(best.values()))
    rows = []
    for name in names:
        wer, cer = scores[name]
        rtf = best[name] / audio_sec
        print(f"{name:<52} {wer:7.2f} {cer:7.2f} {rtf:8.4f} {best[name] / base:13.2f}x")
        rows.append({"variant": name, "wer": wer, "cer": cer, "rtf": rtf, "seconds": best[name]})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
