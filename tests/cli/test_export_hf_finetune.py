"""``asr-pipeline export`` of an hf_finetune run: a transformers folder, never written over another folder."""

from __future__ import annotations

import pytest

from asr_pipeline.cli import main
from asr_pipeline.hf_finetune.features import featurize
from asr_pipeline.hf_finetune.models import load_pretrained
from asr_pipeline.hf_finetune.options import hf_finetune_options
from asr_pipeline.hf_finetune.trainer import FinetuneRun
from tests.hf_finetune.conftest import save_tiny_voxtral, short_sentences, write_demo_utterances


@pytest.mark.slow
def test_an_hf_finetune_run_exports_as_a_from_pretrained_folder_and_replaces_only_an_export(tmp_path, capsys):
    texts = short_sentences(6)
    manifest = write_demo_utterances(tmp_path, texts, "train", seed=1)
    model = save_tiny_voxtral(tmp_path / "voxtral", texts)
    extractor = load_pretrained(str(model)).feature_extractor
    data = featurize(manifest, extractor, tmp_path / "cache", max_windows=None, max_audio_sec=30).directory
    options = hf_finetune_options({"model": str(model), "method": "lora", "max_steps": 1, "batch_size": 6})
    FinetuneRun(options, data, None, tmp_path / "run").run()
    command = ["export", "--run-dir", str(tmp_path / "run"), "--output"]
    output = tmp_path / "export"
    assert main([*command, str(output)]) == 0
    assert '"format": "transformers"' in capsys.readouterr().out
    assert type(load_pretrained(str(output)).model).__name__ == "VoxtralForConditionalGeneration"
    assert main([*command, str(output)]) != 0
    assert "pass --overwrite to replace an earlier export" in capsys.readouterr().err
    assert main([*command, str(output), "--overwrite", "--space", str(tmp_path / "space")]) == 0
    assert {"app.py", "requirements.txt", "README.md", "model"} <= {
        p.name for p in (tmp_path / "space").iterdir()
    }
    assert main([*command, str(tmp_path / "cache"), "--overwrite"]) != 0  # not an export: left as it was
    assert (tmp_path / "cache").is_dir() and "never replaced" in capsys.readouterr().err
