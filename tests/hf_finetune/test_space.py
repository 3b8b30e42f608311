"""The Space folder of an export runs on its own (no asr_pipeline import) and transcribes as training scored."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
import soundfile as sf

from asr_pipeline.hf_finetune.evaluate import transcribe_shards
from asr_pipeline.hf_finetune.export import export_finetuned
from asr_pipeline.hf_finetune.features import FeatureShards, featurize
from asr_pipeline.hf_finetune.models import load_pretrained
from asr_pipeline.hf_finetune.options import hf_finetune_options
from asr_pipeline.hf_finetune.space import write_space
from asr_pipeline.hf_finetune.trainer import FinetuneRun
from asr_pipeline.io.audio import load_audio
from asr_pipeline.run_layout import CARD_FILE


@pytest.mark.slow
def test_the_space_app_transcribes_like_the_exported_model(tiny_voxtral, demo_speech, tmp_path):
    utterance = demo_speech["val"].parent / "val-000.wav"
    sf.write(
        tmp_path / "u.wav", load_audio(utterance), 16000, subtype="FLOAT"
    )  # 16 kHz: no resampling anywhere
    (tmp_path / "m.jsonl").write_text('{"id": "u", "audio_path": "u.wav", "text": "x"}\n')
    extractor = load_pretrained(str(tiny_voxtral)).feature_extractor
    data = featurize(tmp_path / "m.jsonl", extractor, tmp_path / "cache", max_windows=None, max_audio_sec=30)
    options = hf_finetune_options({"model": str(tiny_voxtral), "max_steps": 1, "max_new_tokens": 6})
    FinetuneRun(options, data.directory, None, tmp_path / "run").run()
    export_finetuned(tmp_path / "run", tmp_path / "export")
    space = write_space(tmp_path / "export", tmp_path / "space")
    assert (space / "README.md").read_text().startswith("---\ntitle: ")
    assert "sdk: gradio" in (space / "README.md").read_text()
    script = f"import sys; sys.modules['asr_pipeline'] = None; import app; print('HYP:' + app.transcribe({str(tmp_path / 'u.wav')!r}))"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=space, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    expected = transcribe_shards(
        load_pretrained(str(tmp_path / "export")), FeatureShards(data.directory), max_new_tokens=6
    )
    printed = [line for line in result.stdout.splitlines() if line.startswith("HYP:")]
    assert printed == ["HYP:" + expected[0]["hypothesis"]]
    with pytest.raises(FileExistsError):
        write_space(tmp_path / "export", space)


def test_a_space_of_a_model_with_voxtrals_tekken_json_requires_mistral_common_at_the_version_that_exported(
    tmp_path,
):
    export = tmp_path / "export"
    export.mkdir()
    (export / CARD_FILE).write_text("---\nlibrary_name: transformers\n---\n\n# Fine-tuned tiny\n")
    plain = write_space(export, tmp_path / "plain")
    (export / "tekken.json").write_text("{}")
    tekken = write_space(export, tmp_path / "tekken")

    assert "mistral_common" not in (plain / "requirements.txt").read_text()
    assert (tekken / "requirements.txt").read_text().splitlines()[-1] == (
        f"mistral_common[audio]=={version('mistral_common')}"
    )
