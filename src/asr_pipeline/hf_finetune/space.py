"""An exported fine-tuned model as a Hugging Face Space folder (Gradio), that runs locally as it would there.

``write_space`` writes::

    README.md          the Space's front matter (sdk: gradio, app_file: app.py) and the model card below it
    app.py             upload or record audio, read the transcript (greedy generate() after the training prompt)
    requirements.txt   what app.py imports (and mistral_common, at the version that exported, for a model
                       with Voxtral's own tokenizer, tekken.json)
    speech_model.py    ``hf_finetune.models`` itself, copied: the prompt and generate() of training, one source
    speech_batch.py    ``hf_finetune.collate`` itself, copied (its one import pointed at speech_model)
    model/             the ``export`` folder (from_pretrained)

``python app.py`` in the folder serves it on 127.0.0.1; ``transcribe(path)`` is the page's function.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from asr_pipeline.hf_finetune import collate, models
from asr_pipeline.run_layout import CARD_FILE

APP = '''"""Speech recognition with a fine-tuned model (asr_pipeline hf_finetune export --space)."""

import json
from pathlib import Path

import gradio as gr
import numpy as np
import soundfile as sf
import torch
import torchaudio

from speech_batch import SpeechCollator
from speech_model import load_pretrained

HERE = Path(__file__).parent
OPTIONS = json.loads((HERE / "model" / "training_config.json").read_text())
MODEL = load_pretrained(str(HERE / "model"))
MODEL.model.eval()
EXTRACTOR = MODEL.feature_extractor
COLLATOR = SpeechCollator(MODEL.tokenizer, MODEL.family, EXTRACTOR.nb_max_frames, OPTIONS["language"],
                          OPTIONS["task"], for_generation=True)


def transcribe(path: str) -> str:
    samples, rate = sf.read(path, dtype="float32", always_2d=True)
    waveform = torch.from_numpy(samples.mean(axis=1))  # mono
    if rate != EXTRACTOR.sampling_rate:
        waveform = torchaudio.functional.resample(waveform, rate, EXTRACTOR.sampling_rate)
    features = EXTRACTOR(waveform.numpy(), sampling_rate=EXTRACTOR.sampling_rate, return_tensors="np",
                         padding="longest", pad_to_multiple_of=EXTRACTOR.n_samples, truncation=False)
    windows = np.ascontiguousarray(features["input_features"][0].T)  # (T, F), whole windows
    batch = COLLATOR([{"id": path, "text": "", "features": windows}])
    with torch.no_grad():
        tokens = MODEL.family.generate(MODEL.model, batch, OPTIONS["max_new_tokens"])
    return " ".join(MODEL.tokenizer.decode(tokens[0], skip_special_tokens=True).split())


demo = gr.Interface(transcribe, gr.Audio(sources=["upload", "microphone"], type="filepath"), gr.Textbox(),
                    title=f"Fine-tuned {Path(OPTIONS['model']).name}")

if __name__ == "__main__":
    demo.launch(server_name="127.0.0.1")
'''
REQUIREMENTS = "torch\ntorchaudio\ntransformers>=4.56\ngradio>=5\nsoundfile\nnumpy\n"


def tokenizer_requirements(model_dir: Path) -> str:
    """mistral_common where the model's tokenizer is Voxtral's Tekken (transformers reads tekken.json through it)."""
    if not (model_dir / "tekken.json").is_file():
        return ""
    from importlib.metadata import version

    return f"mistral_common[audio]=={version('mistral_common')}\n"


def write_space(export_dir: str | Path, output: str | Path) -> Path:
    """The Space folder (module docstring) of the export in ``export_dir``; ``output`` must not exist."""
    export_dir, output = Path(export_dir), Path(output)
    if output.exists():
        raise FileExistsError(f"{output} exists; a Space is written into a new folder")
    if not (export_dir / CARD_FILE).is_file():
        raise FileNotFoundError(f"{export_dir} is no hf_finetune export (no {CARD_FILE}); run export first")
    staging = output.with_name(f".{output.name}.space-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(export_dir, staging / "model")
    card = (export_dir / CARD_FILE).read_text().split("---\n", 2)[-1]  # the card without its YAML header
    title = card.splitlines()[1].lstrip("# ") if card.startswith("\n") else "Fine-tuned speech model"
    front = f"---\ntitle: {title}\nsdk: gradio\napp_file: app.py\npinned: false\n---\n"
    (staging / "README.md").write_text(front + card)
    (staging / "app.py").write_text(APP)
    (staging / "requirements.txt").write_text(REQUIREMENTS + tokenizer_requirements(export_dir))
    shutil.copyfile(models.__file__, staging / "speech_model.py")
    batch = Path(collate.__file__).read_text()
    old = "from asr_pipeline.hf_finetune.models import ModelFamily"
    if old not in batch:
        raise RuntimeError(
            "hf_finetune.collate no longer imports ModelFamily as write_space expects; update it"
        )
    (staging / "speech_batch.py").write_text(batch.replace(old, "from speech_model import ModelFamily"))
    staging.rename(output)
    return output


__all__ = ["tokenizer_requirements", "write_space"]
