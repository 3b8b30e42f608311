"""Decoders side by side on one trained run's log-probs: WER/CER and decode time per 100 utterances.

Rows: greedy; our flashlight lexicon and lexicon-free decoders (decoding.flashlight); torchaudio's
``ctc_decoder`` (the same flashlight-text engine behind torchaudio's wrapper: the peer every row's speed is
compared with) on the same lexicon, LM and beam; our Python prefix beam search (the reference). The acoustic
model runs once; every decoder reads the same log-probs. LM weights and word scores are the tuned ones of
``data/08_tuning/decoding.json`` when it exists (``dvc repro tune_decoding``), else the defaults below.

With CUDA visible, pairs of rows compare at equal beam (``--cuda-beams``) and no LM: our lexicon-free flashlight
search on the CPU and torchaudio's ``cuda_ctc_decoder`` (``--decoder cuda``) on the GPU.

    python benchmarks/bench_decoders.py            # the demo's run, test split (after `make demo`)
    python benchmarks/bench_decoders.py --data /elsewhere/data   # the same layout under another root
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
from torchaudio.models.decoder import ctc_decoder

from asr_pipeline.decoding.decoders import DecodingResources, GreedyDecoder, build_decoder
from asr_pipeline.decoding.evaluation import load_run, run_log_probs
from asr_pipeline.decoding.flashlight import BLANK_TOKEN, SILENCE_TOKEN, token_names
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.text.tokenizer import CTCTokenizer

DATA = Path("data")
REPEATS = 3  # best of: the machine is shared; the fastest run is the least disturbed one


class TorchaudioDecoder:
    """torchaudio's flashlight wrapper, given the same tokens (plus the never-emitted silence column), lexicon,
    LM and weights as ours."""

    def __init__(self, options: DecodingOptions, tokenizer: CTCTokenizer, lexicon: Path, lm: Path) -> None:
        self.tokenizer = tokenizer
        self.decoder = ctc_decoder(
            lexicon=str(lexicon),
            tokens=[*token_names(tokenizer), SILENCE_TOKEN],
            lm=str(lm),
            beam_size=options.beam_width,
            beam_threshold=options.beam_threshold,
            lm_weight=options.lm_weight * math.log(10.0),
            word_score=options.word_score,
            blank_token=BLANK_TOKEN,
            sil_token=SILENCE_TOKEN,
        )

    def decode_texts(self, log_probs: torch.Tensor, lengths: torch.Tensor) -> list[str]:
        batch, frames, vocab = log_probs.shape
        emissions = torch.full((batch, frames, vocab + 1), -math.inf)
        emissions[:, :, :vocab] = log_probs
        found = self.decoder(emissions, lengths)
        # flashlight starts and ends every path on the silence token; it has no text
        return [
            self.tokenizer.decode([t for t in h[0].tokens.tolist() if t < vocab]) if h else "" for h in found
        ]


def timed(decode, batches) -> tuple[list[str], float]:
    best, texts = math.inf, []
    for _ in range(REPEATS):
        started = time.perf_counter()
        texts = [text for batch in batches for text in decode(batch.log_probs, batch.lengths)]
        best = min(best, time.perf_counter() - started)
    return texts, best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA), help="the project's data folder (its layout)")
    parser.add_argument("--run-dir", help="default: DATA/07_train/run")
    parser.add_argument("--shards", help="default: DATA/04_features/test")
    parser.add_argument("--beam-width", type=int, default=16)
    parser.add_argument(
        "--cuda-beams",
        type=int,
        nargs="+",
        default=[1, 4, 16],
        help="with CUDA: beams of the no-LM GPU/CPU pairs",
    )
    args = parser.parse_args()
    data = Path(args.data)
    args.run_dir = args.run_dir or str(data / "07_train" / "run")
    args.shards = args.shards or str(data / "04_features" / "test")
    run_dir = Path(args.run_dir)
    if not (run_dir / "checkpoint_latest.json").is_file():
        print(f"no trained run at {run_dir}: run `make demo` first (or pass --run-dir)", file=sys.stderr)
        return 0
    tuned_path = data / "08_tuning" / "decoding.json"
    tuned = json.loads(tuned_path.read_text()) if tuned_path.is_file() else {}
    lexicon, word_lm, token_lm = (
        data / "03_tokenizer" / "lexicon.txt",
        data / "06_lm" / "lm.binary",
        data / "06_lm" / "tokens_lm.binary",
    )
    resources = DecodingResources(word_lm=word_lm, token_lm=token_lm, lexicon=lexicon)

    def options(decoder: str, **defaults) -> DecodingOptions:
        values = {**defaults, **tuned.get(decoder, {}), "decoder": decoder, "beam_width": args.beam_width}
        return DecodingOptions.from_dict(values)

    run = load_run(run_dir)
    tokenizer = CTCTokenizer((run_dir / "tokenizer.model").read_bytes(), blank_id=run.blank_id)
    shards = sorted(str(p) for p in Path(args.shards).glob("*.parquet"))
    batches = list(run_log_probs(run, shards, batch_size=16))
    references = [text for batch in batches for text in batch.texts]
    lexicon_options = options("lexicon", lm_weight=0.5, word_score=2.0)

    def texts_of(decoder):
        return lambda log_probs, lengths: [
            n[0].text if n else "" for n in decoder.decode_batch(log_probs, lengths)
        ]

    rows = [
        ("greedy", texts_of(GreedyDecoder(DecodingOptions(), tokenizer))),
        (
            f"lexicon (ours, flashlight) w={lexicon_options.lm_weight} s={lexicon_options.word_score}",
            texts_of(resources.build(lexicon_options, tokenizer)),
        ),
        (
            "torchaudio ctc_decoder, same lexicon/LM/weights",
            TorchaudioDecoder(lexicon_options, tokenizer, lexicon, word_lm).decode_texts,
        ),
        (
            f"lexicon_free (ours, flashlight) w={options('lexicon_free').lm_weight}",
            texts_of(resources.build(options("lexicon_free"), tokenizer)),
        ),
        (
            "prefix_beam (our Python reference), same weights",
            texts_of(
                resources.build(
                    DecodingOptions(
                        decoder="prefix_beam",
                        beam_width=args.beam_width,
                        lm_weight=lexicon_options.lm_weight,
                        word_score=lexicon_options.word_score,
                    ),
                    tokenizer,
                )
            ),
        ),
    ]
    for beam_width in args.cuda_beams if torch.cuda.is_available() else []:
        beam = {"beam_width": beam_width, "lm_weight": 0.0}
        try:  # refused where torchaudio's kernels would abort the process (CudaDecoder says why)
            cuda = build_decoder(DecodingOptions(decoder="cuda", **beam), tokenizer)
        except ValueError as refused:
            print(f"beam {beam_width}: no GPU row: {refused}")
            continue
        rows += [
            (
                f"lexicon_free, no LM, beam {beam_width} (ours, flashlight, CPU)",
                texts_of(build_decoder(DecodingOptions(decoder="lexicon_free", **beam), tokenizer)),
            ),
            (f"cuda_ctc_decoder, no LM, beam {beam_width} (torchaudio, GPU)", texts_of(cuda)),
        ]
    # The peer first, then each row printed as soon as it is measured (a decoder that aborts the process, as
    # torchaudio's cuda_ctc_decoder can on Hopper GPUs, leaves the rows before it on the screen).
    rows.sort(key=lambda row: not row[0].startswith("torchaudio"))
    print(
        f"{len(references)} utterances of {args.shards}, beam {args.beam_width}, best of {REPEATS}; run {run_dir}"
    )
    print(f"{'decoder':58s} {'WER %':>7s} {'CER %':>7s} {'s/100 utt':>10s} {'x torchaudio':>13s}", flush=True)
    peer = None
    for name, decode in rows:
        texts, seconds = timed(decode, batches)
        rates = error_rates(references, texts)
        peer = peer or seconds
        per_100 = 100 * seconds / len(references)
        print(
            f"{name:58s} {rates.wer:7.2f} {rates.cer:7.2f} {per_100:10.3f} {seconds / peer:13.2f}", flush=True
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
