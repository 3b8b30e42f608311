"""hubert.runs: a kept checkpoint rebuilds at its own width with its step and epoch; the stages' tables are TSV
with a header, floats at a fixed number of decimals and None as an empty cell."""

from __future__ import annotations

import torch

from asr_pipeline.hubert.runs import load_kept_model, write_table
from asr_pipeline.models.registry import get_spec
from asr_pipeline.models.speech_aligner import SpeechAligner
from asr_pipeline.training.checkpoint import save_kept_weights


def test_a_table_is_a_header_and_one_tab_separated_row_each(tmp_path):
    rows = [{"layer": 6, "abx": 12.34567, "note": None}, {"layer": 9, "abx": 8.0, "note": "best"}]

    write_table(tmp_path / "abx.tsv", ["layer", "abx", "note"], rows, digits=2)

    assert (tmp_path / "abx.tsv").read_text() == "layer\tabx\tnote\n6\t12.35\t\n9\t8.00\tbest\n"


def test_an_empty_table_still_has_its_header(tmp_path):
    write_table(tmp_path / "empty.tsv", ["layer", "abx"], [], digits=3)

    assert (tmp_path / "empty.tsv").read_text() == "layer\tabx\n"


def test_a_kept_checkpoint_rebuilds_its_model_with_the_same_weights(tmp_path):
    # Any registered architecture rebuilds from the saved model config; the aligner's tiny size is the cheapest.
    config = get_spec("speech-aligner").config_for("tiny", {})
    model = SpeechAligner(config)
    saved = {"input_dim": 39, "channels": [16, 24, 32, 32], "num_heads": 2}
    path = save_kept_weights(tmp_path, model=model, step=120, epoch=3, model_config=saved)

    rebuilt, info = load_kept_model(path, "speech-aligner")

    assert (info["step"], info["epoch"], info["model_config"]) == (120, 3, saved)
    for (name, theirs), ours in zip(rebuilt.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(theirs, ours), name
