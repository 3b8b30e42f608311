"""CTC beam search with flashlight-text's C++ decoders (Kahn et al., 2022, "Flashlight: Enabling Innovation in
Tools for Machine Learning"; the wav2letter decoder of Collobert et al., 2016).

Dimension legend: B batch, T frames, V vocabulary (CTC outputs, blank included).

Two searches over the same token set (our SentencePiece pieces, index = model id, the blank named
``<blank>``):

- ``lexicon``: hypotheses may only spell words of a lexicon (word -> piece spellings, the tokenizer stage's
  ``lexicon.txt``), walked as a trie whose nodes carry the best LM unigram score below them ("smearing", so a
  word is scored before it is finished); a word KenLM scores each finished word.
- ``lexicon_free``: any piece sequence; a piece-level KenLM (the lm stage's ``tokens_lm.binary``) scores
  every piece, so words never seen in training remain possible.

SentencePiece marks word starts inside pieces ("▁the"), so the model has no silence or word-boundary token,
which flashlight's searches want: they get one, ``<sil>``, as an extra last output whose log-prob is -inf in
every frame, so it is never emitted. (Making the blank double as silence was tried: the piece LM then scores
every blank frame as a token, and the lexicon-free WER rose with the LM weight instead of falling.) ``lm_weight`` is given to flashlight as ``lm_weight * ln 10``
because its KenLM wrapper returns log10 probabilities, so that it means the same as in our other decoders.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from flashlight.lib.text.decoder import (
    CriterionType,
    LexiconDecoder,
    LexiconDecoderOptions,
    LexiconFreeDecoder,
    LexiconFreeDecoderOptions,
    SmearingMode,
    Trie,
    ZeroLM,
)
from flashlight.lib.text.decoder.kenlm import KenLM
from flashlight.lib.text.dictionary import Dictionary, create_word_dict, load_words
from torch import Tensor

from asr_pipeline.decoding.options import DecodingOptions, Hypothesis
from asr_pipeline.text.tokenizer import CTCTokenizer

BLANK_TOKEN = "<blank>"
SILENCE_TOKEN = "<sil>"
UNK_WORD = "<unk>"
LN_10 = math.log(10.0)


def token_names(tokenizer: CTCTokenizer) -> list[str]:
    """The name of every model id, as flashlight's token dictionary and the piece LM spell them."""
    return [
        BLANK_TOKEN if i == tokenizer.blank_id else tokenizer.piece(i) for i in range(tokenizer.vocab_size)
    ]


def read_lexicon(path: str | Path) -> dict[str, list[list[str]]]:
    """word -> spellings (lists of pieces) from a ``word<TAB>piece piece ...`` file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"lexicon not found at {path}; the tokenizer stage writes one (`dvc repro tokenizer`)"
        )
    return load_words(str(path))


class FlashlightDecoder:
    """``lexicon`` or ``lexicon_free`` beam search over (B, T, V) log-probs; see the module docstring."""

    def __init__(
        self,
        options: DecodingOptions,
        tokenizer: CTCTokenizer,
        lm_path: str | Path | None = None,
        lexicon: Mapping[str, Sequence[Sequence[str]]] | None = None,
    ) -> None:
        if options.decoder not in ("lexicon", "lexicon_free"):
            raise ValueError(f"FlashlightDecoder runs lexicon or lexicon_free, not {options.decoder}")
        if options.decoder == "lexicon" and not lexicon:
            raise ValueError("the lexicon decoder needs a lexicon (the tokenizer stage's lexicon.txt)")
        self.options, self.tokenizer = options, tokenizer
        names = [*token_names(tokenizer), SILENCE_TOKEN]
        self.tokens = Dictionary(names)
        self.blank, self.silence = tokenizer.blank_id, len(names) - 1
        beam_size_token = options.beam_size_token or len(names)
        lm_weight = options.lm_weight * LN_10
        if options.decoder == "lexicon":
            spellings = {word: [list(s) for s in spelled] for word, spelled in lexicon.items()}
            spellings.setdefault(UNK_WORD, [])
            self.words = create_word_dict(spellings)
            self.lm = self._load_lm(lm_path, self.words)
            trie = self._trie(spellings, names)
            decoder_options = LexiconDecoderOptions(
                beam_size=options.beam_width,
                beam_size_token=beam_size_token,
                beam_threshold=options.beam_threshold,
                lm_weight=lm_weight,
                word_score=options.word_score,
                unk_score=-math.inf if options.unk_score is None else options.unk_score,
                sil_score=0.0,
                log_add=False,
                criterion_type=CriterionType.CTC,
            )
            unk = self.words.get_index(UNK_WORD)
            self.decoder = LexiconDecoder(
                decoder_options, trie, self.lm, self.silence, self.blank, unk, [], False
            )
        else:
            # The piece LM's vocabulary is the token names themselves.
            self.words = create_word_dict({name: [[name]] for name in [*names, UNK_WORD]})
            self.lm = self._load_lm(lm_path, self.words)
            decoder_options = LexiconFreeDecoderOptions(
                beam_size=options.beam_width,
                beam_size_token=beam_size_token,
                beam_threshold=options.beam_threshold,
                lm_weight=lm_weight,
                sil_score=0.0,
                log_add=False,
                criterion_type=CriterionType.CTC,
            )
            self.decoder = LexiconFreeDecoder(decoder_options, self.lm, self.silence, self.blank, [])

    def _load_lm(self, lm_path: str | Path | None, words: Dictionary):
        if lm_path is None:
            return ZeroLM()
        if not Path(lm_path).is_file():
            raise FileNotFoundError(f"KenLM model not found at {lm_path}; build it with the `lm` stage")
        if self.options.lm_weight == 0:
            return ZeroLM()  # it cannot change a score; not querying it halves lexicon-free's time
        return KenLM(str(lm_path), words)

    def _trie(self, spellings: Mapping[str, list[list[str]]], names: list[str]) -> Trie:
        known = {name: index for index, name in enumerate(names)}
        trie = Trie(len(names), self.silence)
        start = self.lm.start(False)
        for word, spelled in spellings.items():
            word_index = self.words.get_index(word)
            _, unigram = self.lm.score(start, word_index)
            for spelling in spelled:
                missing = [piece for piece in spelling if piece not in known]
                if missing:
                    raise ValueError(
                        f"lexicon word {word!r} is spelled with {missing}, which the tokenizer does not have; "
                        "was the lexicon made with this tokenizer?"
                    )
                trie.insert([known[piece] for piece in spelling], word_index, unigram)
        trie.smear(SmearingMode.MAX)
        return trie

    def decode_batch(self, log_probs: Tensor, lengths: Tensor) -> list[list[Hypothesis]]:
        """The ``n_best`` hypotheses of each utterance, best first."""
        vocab = self.tokens.index_size() - 1
        if log_probs.dim() != 3 or log_probs.shape[2] != vocab:
            raise ValueError(
                f"log_probs must be (B, T, V={vocab}), got {tuple(log_probs.shape)}; "
                "was the model trained with this tokenizer?"
            )
        batch, frames, _ = log_probs.shape
        emissions = torch.full((batch, frames, vocab + 1), -math.inf)  # (B, T, V + 1): <sil> never fires
        emissions[:, :, :vocab] = log_probs.detach().float()
        emissions[:, :, self.blank] -= self.options.blank_penalty
        results = []
        for b in range(batch):
            pointer = emissions.data_ptr() + 4 * b * emissions.stride(0)
            found = self.decoder.decode(pointer, int(lengths[b]), vocab + 1)
            results.append([self._hypothesis(result) for result in found[: self.options.n_best]])
        return results

    def _hypothesis(self, result) -> Hypothesis:
        # result.tokens holds one output per frame, with a boundary entry (-1) at each end.
        frames, tokens, previous = [], [], self.blank
        for frame, token in enumerate(result.tokens[1:-1]):
            if token != self.blank and token != previous:
                frames.append(frame)
                tokens.append(int(token))
            previous = token
        lm_score = result.lmScore * LN_10  # natural log, unweighted
        return Hypothesis(
            tuple(tokens),
            self.tokenizer.decode(tokens),
            result.emittingModelScore,
            lm_score,
            result.score,
            tuple(frames),
        )
