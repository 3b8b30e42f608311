"""Decoding strategies behind one call: ``build_decoder(options, tokenizer, ...)`` -> ``decode_batch``.

Dimension legend: B batch, T frames, V vocabulary (CTC outputs, blank included).

Every strategy takes (B, T, V) log-probs and (B,) lengths and returns, per utterance, its ``n_best``
``Hypothesis`` list, best first. Validation, the `evaluate` and `tune_decoding` stages and
``asr-pipeline decode`` all build their decoder here, from a ``DecodingOptions`` and the files it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor

from asr_pipeline.decoding.beam_search import CTCPrefixBeamSearch, load_lm
from asr_pipeline.decoding.flashlight import FlashlightDecoder, read_lexicon, token_names
from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.options import DecodingOptions, Hypothesis
from asr_pipeline.text.tokenizer import CTCTokenizer


class Decoder(Protocol):
    options: DecodingOptions

    def decode_batch(self, log_probs: Tensor, lengths: Tensor) -> list[list[Hypothesis]]: ...


class GreedyDecoder:
    """Best path: one hypothesis per utterance, its score the summed frame maxima."""

    def __init__(self, options: DecodingOptions, tokenizer: CTCTokenizer, collapse: bool = True) -> None:
        # collapse=False: per-token posteriors (a Paraformer's decoder), every position one token
        self.options, self.tokenizer, self.collapse = options, tokenizer, collapse

    def decode_batch(self, log_probs: Tensor, lengths: Tensor) -> list[list[Hypothesis]]:
        best = greedy_decode(log_probs, lengths, blank_id=self.tokenizer.blank_id, collapse=self.collapse)
        maxima = log_probs.detach().max(dim=-1).values.double()  # (B, T)
        results = []
        for b, ids in enumerate(best):
            score = float(maxima[b, : int(lengths[b])].sum())
            results.append([Hypothesis(tuple(ids), self.tokenizer.decode(ids), score, 0.0, score)])
        return results


# torchaudio's cuda_ctc_decoder on compute capability >= HOPPER: the widest beam that decoded (see CudaDecoder)
HOPPER = (9, 0)
HOPPER_SAFE_BEAM = 4


class CudaDecoder:
    """torchaudio's ``cuda_ctc_decoder``: CTC prefix beam search on the GPU, without an LM.

    Frames whose blank probability exceeds ``blank_skip_threshold`` are skipped (its speed trick); it
    wants the blank at index 0, which is our default ``blank_id``.

    On Hopper and newer GPUs (compute capability 9.0 and up) torchaudio 2.11's kernels read out of bounds
    (pytorch/audio#3754) and abort the whole process with ``cudaErrorIllegalAddress`` from beam 8 on; on an
    H100 beams 1 and 4 decoded and 8, 10 and 16 aborted (benchmarks/probe_cuda_ctc_decoder.py). Wider beams
    are refused there with that reason instead of killing the caller.
    """

    def __init__(self, options: DecodingOptions, tokenizer: CTCTokenizer) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError("the cuda decoder needs a CUDA device; use lexicon or lexicon_free on the CPU")
        if tokenizer.blank_id != 0:
            raise ValueError(f"the cuda decoder needs blank_id 0, the tokenizer has {tokenizer.blank_id}")
        capability = torch.cuda.get_device_capability()
        if capability >= HOPPER and options.beam_width > HOPPER_SAFE_BEAM:
            raise ValueError(
                f"the cuda decoder aborts the process at beam_width {options.beam_width} on this GPU (compute "
                f"capability {capability[0]}.{capability[1]}): torchaudio's cuda_ctc_decoder reads out of bounds "
                f"there (pytorch/audio#3754); use beam_width <= {HOPPER_SAFE_BEAM}, or the lexicon_free decoder"
            )
        from torchaudio.models.decoder import cuda_ctc_decoder

        self.options, self.tokenizer = options, tokenizer
        self.decoder = cuda_ctc_decoder(
            token_names(tokenizer),
            nbest=options.n_best,
            beam_size=options.beam_width,
            blank_skip_threshold=options.blank_skip_threshold,
        )

    def decode_batch(self, log_probs: Tensor, lengths: Tensor) -> list[list[Hypothesis]]:
        found = self.decoder(
            log_probs.detach().to("cuda", torch.float32).contiguous(), lengths.to("cuda", torch.int32)
        )
        return [
            [
                Hypothesis(tuple(h.tokens), self.tokenizer.decode(h.tokens), h.score, 0.0, h.score)
                for h in hyps
            ]
            for hyps in found
        ]


def build_decoder(
    options: DecodingOptions,
    tokenizer: CTCTokenizer,
    lm_path: str | Path | None = None,
    lexicon_path: str | Path | None = None,
) -> Decoder:
    """The strategy ``options.decoder`` names. ``lm_path``: the word KenLM (lexicon, prefix_beam) or the
    piece KenLM (lexicon_free), None for none; ``lexicon_path``: the lexicon (lexicon decoder only)."""
    decoder = options.decoder
    if lm_path is not None and options.lm_kind is None:
        raise ValueError(f"the {decoder} decoder fuses no LM; drop the LM or choose lexicon/lexicon_free")
    if decoder == "greedy":
        return GreedyDecoder(options, tokenizer)
    if decoder == "cuda":
        return CudaDecoder(options, tokenizer)
    if decoder == "prefix_beam":
        return CTCPrefixBeamSearch(options, tokenizer, load_lm(lm_path) if lm_path is not None else None)
    if decoder == "lexicon" and lexicon_path is None:
        raise ValueError("the lexicon decoder needs a lexicon: the tokenizer stage's lexicon.txt")
    lexicon = read_lexicon(lexicon_path) if decoder == "lexicon" else None
    return FlashlightDecoder(options, tokenizer, lm_path, lexicon)


@dataclass(frozen=True)
class DecodingResources:
    """The files decoders read besides log-probs; each decoder takes the ones it needs.

    ``word_lm``: word KenLM (lexicon, prefix_beam); ``token_lm``: piece KenLM (lexicon_free); ``lexicon``:
    ``word<TAB>pieces`` lines (lexicon). A decoder that needs a missing lexicon fails; a missing LM means none.
    """

    word_lm: Path | None = None
    token_lm: Path | None = None
    lexicon: Path | None = None

    def build(self, options: DecodingOptions, tokenizer: CTCTokenizer) -> Decoder:
        lm = {"word": self.word_lm, "token": self.token_lm, None: None}[options.lm_kind]
        return build_decoder(options, tokenizer, lm, self.lexicon)
