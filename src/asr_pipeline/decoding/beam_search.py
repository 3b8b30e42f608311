"""CTC prefix beam search with optional word-level KenLM shallow fusion.

Dimension legend: B batch, T frames, V vocabulary (CTC outputs, blank included).

Prefix beam search (Hannun et al., 2014, "First-Pass Large Vocabulary Continuous Speech Recognition
using Bi-Directional Recurrent DNNs"; Graves, 2012, ch. 7) keeps, for every labelling prefix in the
beam, the total probability of all alignments that produce it, split by how they end:

    p_blank  -- alignments whose last frame is the blank
    p_token  -- alignments whose last frame is the prefix's last token

The split matters for repeats: after "a" a frame of "a" either continues the same "a" (from p_token, the
prefix is unchanged) or, only when a blank came in between (from p_blank), starts a second "a".

Shallow fusion scores whole words with an n-gram model: a word is known to be complete only when the
next word starts (a piece beginning with "▁") or the utterance ends, so the LM term of a prefix covers
its completed words. A prefix's score is

    log p_acoustic + lm_weight * ln P_LM(completed words) + word_bonus * (number of completed words)

and at the end the last word and, with ``lm_eos``, the sentence end ``</s>`` are added. The unfinished
word of a prefix is not scored yet, so prefixes in the middle of a word are briefly favoured over ones
that have just paid for a word; a wide enough beam absorbs this (the usual trade-off of word-level
fusion without a lexicon trie).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from pathlib import Path

import kenlm
import numpy as np
import torch
from torch import Tensor

from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.text.tokenizer import WORD_BOUNDARY, CTCTokenizer

NEG_INF = float("-inf")
LN_10 = math.log(10.0)  # KenLM returns log10 probabilities; acoustic scores are natural logs


@dataclass(frozen=True)
class BeamSearchOptions:
    """How wide to search and how strongly the LM speaks.

    ``token_prune_threshold`` and ``max_candidates_per_frame`` bound the work per frame: a trained CTC
    model puts almost all mass on one or two outputs per frame, so extending every prefix by all V
    outputs would spend nearly all the time on extensions that can never enter the beam.
    """

    beam_width: int = 8
    n_best: int = 1
    lm_weight: float = 0.45
    word_bonus: float = 0.0
    lm_bos: bool = True
    lm_eos: bool = True
    token_prune_threshold: float = -12.0  # skip outputs whose frame log-prob is below this
    max_candidates_per_frame: int = 16

    def __post_init__(self) -> None:
        if self.beam_width < 1:
            raise ValueError(f"beam_width must be >= 1, got {self.beam_width}")
        if not 1 <= self.n_best <= self.beam_width:
            raise ValueError(
                f"n_best must lie in [1, beam_width={self.beam_width}], got {self.n_best}: "
                "the search only ever holds beam_width hypotheses"
            )
        if self.max_candidates_per_frame < 1:
            raise ValueError(f"max_candidates_per_frame must be >= 1, got {self.max_candidates_per_frame}")


@dataclass(frozen=True)
class Hypothesis:
    """One decoded labelling.

    ``acoustic_score`` is the natural-log probability of the labelling summed over its alignments (for
    the best-path shortcut, see ``CTCPrefixBeamSearch``, the log probability of the single best
    alignment). ``lm_score`` is the unweighted natural-log LM probability of the words (``</s>``
    included when ``lm_eos``; 0 without an LM), kept apart so n-best lists can be re-weighted offline.
    ``score = acoustic_score + lm_weight * lm_score + word_bonus * number_of_words`` (the LM terms only
    with an LM).
    """

    tokens: tuple[int, ...]
    text: str
    acoustic_score: float
    lm_score: float
    score: float


class _Prefix:
    """A node of the prefix trie: one labelling and the LM context it implies.

    Nodes are unique per labelling (a child is looked up before it is made), so the beam can be keyed
    by node identity instead of hashing ever longer token tuples, and a prefix's LM state is computed
    once however many frames it stays in the beam.
    """

    __slots__ = (
        "children",
        "fusion",
        "lm_logprob",
        "lm_state",
        "num_words",
        "parent",
        "partial_word",
        "token",
    )

    def __init__(
        self,
        parent: _Prefix | None,
        token: int,
        lm_state: kenlm.State | None,
        partial_word: str,
        lm_logprob: float,
        num_words: int,
        fusion: float,
    ) -> None:
        self.parent = parent
        self.token = token  # last token of the labelling; -1 for the empty prefix
        self.children: dict[int, _Prefix] = {}
        self.lm_state = lm_state  # KenLM context after the last completed word
        self.partial_word = partial_word  # text of the word still being spelled
        self.lm_logprob = lm_logprob  # ln P_LM of the completed words
        self.num_words = num_words  # completed words
        self.fusion = fusion  # lm_weight * lm_logprob + word_bonus * num_words

    def tokens(self) -> tuple[int, ...]:
        reversed_tokens = []
        node = self
        while node.parent is not None:
            reversed_tokens.append(node.token)
            node = node.parent
        return tuple(reversed(reversed_tokens))


def _logaddexp(a: float, b: float) -> float:
    # math.* on Python floats: numpy's scalar logaddexp costs ~1 µs a call, several times slower here.
    if a < b:
        a, b = b, a
    if b == NEG_INF:
        return a
    return a + math.log1p(math.exp(b - a))


def _accumulate(beams: dict[_Prefix, list[float]], prefix: _Prefix, slot: int, log_prob: float) -> None:
    entry = beams.get(prefix)
    if entry is None:
        entry = beams[prefix] = [NEG_INF, NEG_INF]  # [p_blank, p_token]
    entry[slot] = _logaddexp(entry[slot], log_prob)


class CTCPrefixBeamSearch:
    """CTC prefix beam search over (T, V) log-softmax outputs, with optional KenLM word fusion.

    With ``beam_width == 1`` and no LM this is best-path decoding and returns exactly
    ``greedy_decode``. (A one-prefix *prefix* search is not the same thing: it sums alignments, so
    when a frame's argmax is a new token whose probability is below the blank's plus the repeat's it
    keeps the old prefix where the best path moves on. Beam width 1 is asked for to get greedy output.)
    """

    def __init__(
        self, options: BeamSearchOptions, tokenizer: CTCTokenizer, lm: kenlm.Model | None = None
    ) -> None:
        self.options = options
        self.tokenizer = tokenizer
        self.lm = lm
        self.blank_id = tokenizer.blank_id
        # Control pieces (<s>, </s>) have no surface text: they must not leak into LM words.
        processor = tokenizer.processor
        self._pieces = [
            ""
            if model_id == tokenizer.blank_id or processor.is_control(tokenizer.to_piece_id(model_id))
            else tokenizer.piece(model_id)
            for model_id in range(tokenizer.vocab_size)
        ]

    # ---------------------------------------------------------------------------------------- public

    def decode(self, log_probs: Tensor) -> list[Hypothesis]:
        """The ``n_best`` hypotheses for one utterance's (T, V) log-probs, best first."""
        if log_probs.dim() != 2:
            raise ValueError(f"decode expects log_probs of shape (T, V), got {tuple(log_probs.shape)}")
        if log_probs.shape[1] != self.tokenizer.vocab_size:
            raise ValueError(
                f"log_probs have V={log_probs.shape[1]} outputs but the tokenizer has "
                f"{self.tokenizer.vocab_size} (pieces + blank); was the model trained with this tokenizer?"
            )
        if self.options.beam_width == 1 and self.lm is None:
            return [self._best_path(log_probs)]
        return self._search(log_probs.detach().to("cpu", torch.float64).numpy())

    def decode_batch(self, log_probs: Tensor, lengths: Tensor) -> list[list[Hypothesis]]:
        """``decode`` for each utterance of (B, T, V) log-probs, using its first ``lengths[b]`` frames."""
        if log_probs.dim() != 3:
            raise ValueError(
                f"decode_batch expects log_probs of shape (B, T, V), got {tuple(log_probs.shape)}"
            )
        batch, frames, _ = log_probs.shape
        if lengths.shape != (batch,):
            raise ValueError(f"lengths must be (B,) = ({batch},), got shape {tuple(lengths.shape)}")
        if batch and (int(lengths.min()) < 0 or int(lengths.max()) > frames):
            raise ValueError(f"lengths must lie in [0, T={frames}], got {lengths.tolist()}")
        return [self.decode(log_probs[b, : int(lengths[b])]) for b in range(batch)]

    # ---------------------------------------------------------------------------------------- search

    def _search(self, frames: np.ndarray) -> list[Hypothesis]:
        options = self.options
        root = self._root()
        beams: dict[_Prefix, list[float]] = {root: [0.0, NEG_INF]}  # the empty prefix "ends in blank"
        for frame in frames:  # frame: (V,)
            extended: dict[_Prefix, list[float]] = {}
            candidates = self._candidates(frame)
            for prefix, (p_blank, p_token) in beams.items():
                p_total = _logaddexp(p_blank, p_token)
                for token, log_prob in candidates:
                    if token == self.blank_id:
                        _accumulate(extended, prefix, 0, p_total + log_prob)
                    elif token == prefix.token:
                        # Same token again: continues the last token unless a blank separated them.
                        _accumulate(extended, prefix, 1, p_token + log_prob)
                        if p_blank != NEG_INF:
                            _accumulate(extended, self._child(prefix, token), 1, p_blank + log_prob)
                    else:
                        _accumulate(extended, self._child(prefix, token), 1, p_total + log_prob)
            beams = dict(
                heapq.nlargest(
                    options.beam_width,
                    extended.items(),
                    key=lambda item: _logaddexp(item[1][0], item[1][1]) + item[0].fusion,
                )
            )

        finished = [
            self._finish(prefix, _logaddexp(p_blank, p_token)) for prefix, (p_blank, p_token) in beams.items()
        ]
        finished.sort(key=lambda hypothesis: hypothesis.score, reverse=True)
        return finished[: options.n_best]

    def _candidates(self, frame: np.ndarray) -> list[tuple[int, float]]:
        """The outputs worth extending with in this frame: the top-k above the threshold, at least one."""
        k = self.options.max_candidates_per_frame
        vocab = frame.shape[0]
        top = np.argpartition(frame, vocab - k)[vocab - k :] if vocab > k else np.arange(vocab)
        kept = top[frame[top] >= self.options.token_prune_threshold]
        if kept.size == 0:
            # Never let a frame kill every prefix (e.g. unnormalised or very flat scores).
            kept = np.array([int(frame.argmax())])
        return list(zip(kept.tolist(), frame[kept].tolist(), strict=True))

    def _best_path(self, log_probs: Tensor) -> Hypothesis:
        frames = log_probs.shape[0]
        tokens = tuple(greedy_decode(log_probs[None], torch.tensor([frames]), self.blank_id)[0])
        acoustic = float(log_probs.detach().to(torch.float64).max(dim=-1).values.sum()) if frames else 0.0
        return Hypothesis(tokens, self.tokenizer.decode(tokens), acoustic, 0.0, acoustic)

    # -------------------------------------------------------------------------------------- LM state

    def _root(self) -> _Prefix:
        state = None
        if self.lm is not None:
            state = kenlm.State()
            if self.options.lm_bos:
                self.lm.BeginSentenceWrite(state)
            else:
                self.lm.NullContextWrite(state)
        return _Prefix(None, -1, state, "", 0.0, 0, 0.0)

    def _child(self, prefix: _Prefix, token: int) -> _Prefix:
        child = prefix.children.get(token)
        if child is None:
            child = prefix.children[token] = self._make_child(prefix, token)
        return child

    def _make_child(self, prefix: _Prefix, token: int) -> _Prefix:
        if self.lm is None:
            return _Prefix(prefix, token, None, "", 0.0, 0, 0.0)
        piece = self._pieces[token]
        if not piece.startswith(WORD_BOUNDARY):
            return _Prefix(
                prefix,
                token,
                prefix.lm_state,
                prefix.partial_word + piece,
                prefix.lm_logprob,
                prefix.num_words,
                prefix.fusion,
            )
        # A new word starts, so the word spelled so far is complete and the LM can score it.
        state, lm_logprob, num_words = prefix.lm_state, prefix.lm_logprob, prefix.num_words
        if prefix.partial_word:
            state, word_logprob = self._score_word(state, prefix.partial_word)
            lm_logprob += word_logprob
            num_words += 1
        return _Prefix(
            prefix,
            token,
            state,
            piece.lstrip(WORD_BOUNDARY),
            lm_logprob,
            num_words,
            self.options.lm_weight * lm_logprob + self.options.word_bonus * num_words,
        )

    def _score_word(self, state: kenlm.State, word: str) -> tuple[kenlm.State, float]:
        next_state = kenlm.State()
        log10_prob = self.lm.BaseScore(state, word, next_state)
        return next_state, log10_prob * LN_10

    def _finish(self, prefix: _Prefix, acoustic: float) -> Hypothesis:
        tokens = prefix.tokens()
        text = self.tokenizer.decode(tokens)
        if self.lm is None:
            return Hypothesis(tokens, text, acoustic, 0.0, acoustic)
        state, lm_logprob, num_words = prefix.lm_state, prefix.lm_logprob, prefix.num_words
        if prefix.partial_word:  # the utterance end completes the last word
            state, word_logprob = self._score_word(state, prefix.partial_word)
            lm_logprob += word_logprob
            num_words += 1
        if self.options.lm_eos:
            _, end_logprob = self._score_word(state, "</s>")
            lm_logprob += end_logprob
        score = acoustic + self.options.lm_weight * lm_logprob + self.options.word_bonus * num_words
        return Hypothesis(tokens, text, acoustic, lm_logprob, score)


def load_lm(path: str | Path) -> kenlm.Model:
    """Load a KenLM model (ARPA or binary) for shallow fusion."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"KenLM model not found at {path}; build it with the `lm` stage "
            "(`dvc repro lm` or `kedro run --pipelines=lm`) or point the decoder at an existing .arpa/.bin"
        )
    return kenlm.Model(str(path))


__all__ = ["BeamSearchOptions", "CTCPrefixBeamSearch", "Hypothesis", "load_lm"]
