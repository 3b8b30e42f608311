"""The one shape of decoding options and results, shared by validation, `evaluate`, `decode` and tuning.

Decoders (``DecodingOptions.decoder``):

    greedy        best path (argmax per frame, repeats merged, blanks dropped); no LM
    lexicon       flashlight's lexicon-constrained beam search: words from the lexicon only, a word KenLM
    lexicon_free  flashlight's lexicon-free beam search: any piece sequence, a piece-level KenLM; the way
                  to decode words the lexicon lacks (open vocabulary)
    prefix_beam   our Python CTC prefix beam search with word-KenLM fusion (``beam_search.py``): the
                  reference the flashlight decoders are tested against; slower
    cuda          torchaudio's ``cuda_ctc_decoder``: prefix beam search on the GPU, no LM

Scores are natural logs everywhere: ``lm_weight`` multiplies ln P_LM (flashlight's KenLM wrapper returns
log10, so the flashlight decoders are given ``lm_weight * ln 10``), and ``word_score`` is added per word
(lexicon, prefix_beam). Flashlight's lexicon-free search has no per-word or per-piece score, and a piece LM
alone pulls it towards fewer pieces (deletions); ``blank_penalty`` (icefall's ``--blank-penalty``) is the
counterweight there: it is subtracted from the blank's log-prob in every frame before the flashlight searches,
which favours emitting a piece over staying blank.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asr_pipeline.options import options_from_dict, setting

DECODERS = ("greedy", "lexicon", "lexicon_free", "prefix_beam", "cuda")
# The decoders whose beam search fuses a KenLM model, and which model each reads.
WORD_LM_DECODERS = ("lexicon", "prefix_beam")
TOKEN_LM_DECODERS = ("lexicon_free",)


@dataclass(frozen=True)
class DecodingOptions:
    """How to turn CTC log-probs into text. The LM and lexicon files are given beside these (``build_decoder``).

    ``beam_threshold`` (flashlight) drops hypotheses scoring more than this below the frame's best;
    ``beam_size_token`` bounds the outputs tried per frame (None: all for flashlight, 16 for prefix_beam).
    ``unk_score`` (lexicon) lets a piece sequence that is a prefix of a lexicon word end as ``<unk>``
    (None: never). ``lm_no_bos``/``lm_no_eos``
    (prefix_beam only) drop the sentence start/end contexts.
    """

    decoder: str = setting(
        "greedy",
        help="the decoder: greedy, lexicon (a lexicon and a word LM), lexicon_free (a piece LM), prefix_beam, cuda",
        flag="decoder",
        choices=DECODERS,
    )
    beam_width: int = setting(
        16,
        help="beam width of a beam decoder",
        flag="beam-width",
        reference=1,
        reference_note="the reference trainer's validation beam is 1; ours is 16, the width the beam decoders "
        "were tuned at (the default decoder, greedy, reads none)",
    )
    n_best: int = setting(1, help="hypotheses kept per utterance (beam search)", flag="n-best")
    lm_weight: float = setting(0.5, help="weight of ln P_LM in the search", flag="lm-weight")
    word_score: float = setting(
        0.0,
        help="score added per word (nats; lexicon, prefix_beam)",
        flag="word-score",
        aliases=("lm-word-bonus", "word-bonus"),
    )
    blank_penalty: float = setting(
        0.0, help="flashlight decoders: subtracted from the blank's log-prob per frame", flag="blank-penalty"
    )
    unk_score: float | None = setting(
        None,
        help="lexicon: score of a piece sequence that ends as <unk> (a lexicon word's prefix); unset: never",
    )
    beam_threshold: float = setting(
        25.0, help="flashlight decoders: drop hypotheses scoring more than this below the frame's best"
    )
    beam_size_token: int | None = setting(
        None, help="outputs tried per frame at most; unset: all (flashlight), 16 (prefix_beam)"
    )
    lm_no_bos: bool = setting(False, help="prefix_beam: score the first word without <s>", flag="lm-no-bos")
    lm_no_eos: bool = setting(False, help="prefix_beam: do not score </s> at the end", flag="lm-no-eos")
    blank_skip_threshold: float = setting(
        0.95, help="cuda: frames whose blank probability exceeds this are skipped"
    )

    def __post_init__(self) -> None:
        if self.decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {', '.join(DECODERS)}, got {self.decoder!r}")
        if self.beam_width < 1:
            raise ValueError(f"beam_width must be >= 1, got {self.beam_width}")
        if not 1 <= self.n_best <= self.beam_width:
            raise ValueError(
                f"n_best must lie in [1, beam_width={self.beam_width}], got {self.n_best}: "
                "the search only ever holds beam_width hypotheses"
            )
        if self.lm_weight < 0:
            raise ValueError(f"lm_weight must be >= 0, got {self.lm_weight}")
        if self.beam_size_token is not None and self.beam_size_token < 1:
            raise ValueError(f"beam_size_token must be >= 1 or null, got {self.beam_size_token}")
        if self.beam_threshold <= 0:
            raise ValueError(f"beam_threshold must be > 0, got {self.beam_threshold}")
        if (self.lm_no_bos or self.lm_no_eos) and self.decoder != "prefix_beam":
            raise ValueError(
                f"lm_no_bos/lm_no_eos are options of the prefix_beam decoder; {self.decoder} always scores "
                "the sentence start and end"
            )
        if not 0.0 < self.blank_skip_threshold <= 1.0:
            raise ValueError(f"blank_skip_threshold must lie in (0, 1], got {self.blank_skip_threshold}")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None, where: str = "decoding options") -> DecodingOptions:
        return options_from_dict(cls, raw, where)

    @property
    def lm_kind(self) -> str | None:
        """Which LM the decoder fuses: "word", "token" (pieces), or None."""
        if self.decoder in WORD_LM_DECODERS:
            return "word"
        if self.decoder in TOKEN_LM_DECODERS:
            return "token"
        return None


@dataclass(frozen=True)
class Hypothesis:
    """One decoded labelling.

    ``acoustic_score``: the natural-log probability of the labelling (summed over its alignments by the
    prefix search; flashlight's best-alignment score otherwise); ``lm_score`` the unweighted ln P_LM (0
    without an LM), kept apart so n-best lists can be re-weighted; ``score`` what the search ranked by.
    ``frames``: the frame where each token starts, when the decoder reports it (empty otherwise).
    """

    tokens: tuple[int, ...]
    text: str
    acoustic_score: float
    lm_score: float
    score: float
    frames: tuple[int, ...] = ()
