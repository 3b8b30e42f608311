"""pron.letter_to_sound runs g2p-en's model from its weights alone and predicts exactly what g2p-en's ``G2p``
predicts. g2p-en's import reaches for NLTK data over the network, so the comparison gives it placeholder files."""

from __future__ import annotations

import importlib
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

from asr_pipeline.pron.letter_to_sound import LetterToSound

WORDS = ["activationist", "kedro", "zorblax", "dvc", "squeezeformer", "paraformer", "a", "qwertyuiop"]


def test_the_model_predicts_what_g2p_en_predicts(tmp_path, monkeypatch):
    for placeholder in ("taggers/averaged_perceptron_tagger.zip", "corpora/cmudict.zip"):
        (tmp_path / placeholder).parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(tmp_path / placeholder, "w") as archive:  # found: no download is tried
            archive.writestr(Path(placeholder).stem + "/", b"")
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])
    for name in [m for m in sys.modules if m.startswith("g2p_en")]:
        monkeypatch.delitem(sys.modules, name)
    g2p_module = importlib.import_module("g2p_en.g2p")
    # Its dictionary (NLTK's CMUdict) is not what is compared: an empty one, without reading NLTK's corpus.
    monkeypatch.setattr(g2p_module, "cmudict", SimpleNamespace(dict=dict))
    reference = g2p_module.G2p()

    ours = LetterToSound()

    for word in WORDS:
        assert ours.predict(word) == reference.predict(word), word
