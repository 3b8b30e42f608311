"""A trained run as a self-contained model folder, with a model card written from the run itself.

``export_run`` writes (run_layout names the files)::

    config.json            format, architecture, model_config, blank id, vocabulary size, output kind, the
                           frontend (kind, rate, width, frame shift, fbank settings), the checkpoint's step/epoch
    model.safetensors      the checkpoint's weights, byte for byte; with ``weights`` averaged or ema, that
                           average in the model's dtypes (config.json's checkpoint.weights says which)
    tokenizer.model        the SentencePiece model the run trained with
    training_config.json   the run's resolved training config (provenance; the loaders read its data section)
    metrics.json           the run's final metrics and, when given, the evaluate stage's metrics per split
    README.md              the model card: architecture, parameters, data, training, metrics, intended use,
                           limitations, how to load it (Hugging Face's YAML header first)

The folder loads wherever a run dir does (``models.loading.load_run_model``; ``asr-pipeline transcribe`` and
``decode --run-dir``) and gives the same outputs: the weights are the same bytes in the same model. It is
written beside its destination and renamed into place, so a failed export leaves no half folder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from safetensors.torch import save_file

from asr_pipeline.decoding.transcribe import run_frontend
from asr_pipeline.models.loading import RunModel, checkpoint_file, is_export, load_run_model
from asr_pipeline.models.spec import OUTPUTS
from asr_pipeline.run_layout import (
    CARD_FILE,
    CONFIG_FILE,
    DEFAULT_WEIGHTS,
    EXPORT_CONFIG,
    EXPORT_FORMAT,
    METRICS_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    require_checkpoint,
    run_tokenizer,
)
from asr_pipeline.text.tokenizer import CTCTokenizer

# What an export folder holds (module docstring); --overwrite replaces a folder holding nothing else.
EXPORT_FILES = frozenset((EXPORT_CONFIG, WEIGHTS_FILE, TOKENIZER_FILE, CONFIG_FILE, METRICS_FILE, CARD_FILE))
DEMO_CORPUS_MARK = "01_raw/demo"  # the demo corpus's folder (conf/base/globals.yml paths.corpus)


@dataclass(frozen=True)
class CardInfo:
    """What the person publishing adds to the card: the run cannot know them."""

    name: str | None = None
    language: str | None = None  # ISO 639-1, e.g. "en"
    license: str | None = None  # an SPDX id, e.g. "apache-2.0"


def export_run(
    run_dir: str | Path,
    output: str | Path,
    *,
    evaluate_metrics: Sequence[str | Path] = (),
    card: CardInfo | None = None,
    overwrite: bool = False,
    checkpoint: Literal["latest", "best"] = "latest",
    weights: str = DEFAULT_WEIGHTS,
) -> dict[str, Any]:
    """Write the model folder of ``run_dir`` at ``output`` (module docstring); returns its config.json.

    ``evaluate_metrics``: the evaluate stage's JSON files (``data/metrics/evaluate_<split>.json``), reported per
    split on the card. An existing ``output`` is refused unless ``overwrite``. ``checkpoint``: the run's latest
    weights, or its best validation score's (``checkpoint_best``, where early stopping points). ``weights``:
    that checkpoint's raw weights or an average kept beside them (``run_layout.WEIGHTS``).
    ``check_output`` says which folders ``overwrite`` may replace.
    """
    run_dir = require_checkpoint(run_dir, "--run-dir")
    output = Path(output)
    check_output(run_dir, output, overwrite=overwrite)
    tokenizer_path = run_tokenizer(run_dir)
    run = load_run_model(run_dir, checkpoint, weights)
    tokenizer = CTCTokenizer(tokenizer_path.read_bytes(), blank_id=run.blank_id)
    raw_path, pointer = checkpoint_file(run_dir, checkpoint)
    frontend = run_frontend(run)
    config = {
        "format": EXPORT_FORMAT,
        "format_version": 1,
        "architecture": run.architecture,
        "output": run.output,
        "model_config": run.model_config,
        "blank_id": run.blank_id,
        "vocab_size": tokenizer.vocab_size,
        "parameters": sum(p.numel() for p in run.model.parameters()),
        "frontend": {
            "kind": frontend.kind,
            "sample_rate": frontend.sample_rate,
            "feature_dim": frontend.feature_dim,
            "frame_shift_ms": frontend.frame_shift_ms,
            "fbank": asdict(frontend.fbank),
        },
        "checkpoint": {
            "which": checkpoint,
            "weights": weights,
            "step": pointer.get("step"),
            "epoch": pointer.get("epoch"),
        },
    }
    metrics = {
        "training": _read_json(run_dir / METRICS_FILE),
        "evaluate": _evaluate_metrics(evaluate_metrics),
    }

    staging = output.with_name(f".{output.name}.export-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    lora = (run.training_config.get("finetune") or {}).get("method") == "lora"  # adapters only on disk
    if lora or weights != DEFAULT_WEIGHTS:  # the model as loaded: merged, or the (float64) average cast
        save_file(
            {key: value.contiguous() for key, value in run.model.state_dict().items()}, staging / WEIGHTS_FILE
        )
    else:
        shutil.copyfile(raw_path, staging / WEIGHTS_FILE)
    shutil.copyfile(tokenizer_path, staging / TOKENIZER_FILE)
    shutil.copyfile(run_dir / CONFIG_FILE, staging / CONFIG_FILE)
    (staging / METRICS_FILE).write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    (staging / EXPORT_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    (staging / CARD_FILE).write_text(model_card(config, run, metrics, card or CardInfo(), output.name))
    if output.exists():
        shutil.rmtree(output)
    staging.rename(output)
    assert is_export(output)
    return config


def check_output(run_dir: Path, output: Path, *, overwrite: bool = False) -> None:
    """Refuse an ``output`` that export would write over something it did not create (ARCHITECTURE 23):
    the run dir itself, a folder inside it or holding it (symlinks resolved), and an existing path unless
    ``overwrite`` and it is an earlier export (``models.loading.is_export``) holding only an export's files.
    One line each, naming the path and what to do; reads only."""
    source, target = run_dir.resolve(), output.resolve()
    if target == source or source in target.parents or target in source.parents:
        where = "is" if target == source else "lies inside" if source in target.parents else "holds"
        raise ValueError(
            f"--output {output} {where} the run dir --run-dir {run_dir}: export writes a new folder and would "
            "replace or mix with the run; choose an --output outside the run dir"
        )
    if not (output.exists() or output.is_symlink()):
        return
    if not overwrite:
        raise FileExistsError(f"{output} exists; choose another --output or pass --overwrite")
    if not output.is_dir() or not is_export(output):
        raise FileExistsError(
            f"--overwrite replaces only an earlier export (a folder whose {EXPORT_CONFIG} names format "
            f"{EXPORT_FORMAT!r}); {output} is not one: choose another --output, or move {output} away"
        )
    foreign = sorted(path.name for path in output.iterdir() if path.name not in EXPORT_FILES)
    if foreign:
        raise FileExistsError(
            f"--overwrite would delete {output}, which holds files an export does not write "
            f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}): move them away or choose another --output"
        )


def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _evaluate_metrics(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Split name (the file's stem without ``evaluate_``) -> its metrics."""
    found = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such evaluate metrics file")
        found[path.stem.removeprefix("evaluate_")] = json.loads(path.read_text())
    return found


# --- the model card ---------------------------------------------------------------------------------------
def model_card(
    config: Mapping[str, Any], run: RunModel, metrics: Mapping[str, Any], card: CardInfo, folder_name: str
) -> str:
    """README.md of the folder: a Hugging Face model card (YAML header, then Markdown) from the run."""
    training = run.training_config
    data, optim = training.get("data", {}), training.get("optim", {})
    final = metrics.get("training") or {}
    name = card.name or folder_name
    manifests = [str(m) for m in data.get("train_manifests", [])]
    demo = any(DEMO_CORPUS_MARK in m for m in manifests)
    header = ["---", "library_name: asr_pipeline", "pipeline_tag: automatic-speech-recognition"]
    header += [f"language: {card.language}"] if card.language else []
    header += [f"license: {card.license}"] if card.license else []
    header += ["tags:", f"- {OUTPUTS[run.output].card_tag}", f"- {run.architecture}"]
    header += ["- synthetic-speech"] if demo else []
    header += ["---", ""]
    frontend = config["frontend"]
    lines = [
        f"# {name}",
        "",
        f"A {run.architecture} speech recognizer ({_output_words(run.output)}) trained with asr_pipeline "
        f"(`{training.get('model', {}).get('variant') or 'custom'}` size).",
        "",
        "## Model",
        f"- Architecture: `{run.architecture}`, {config['parameters']:,} parameters",
        f"- Vocabulary: {config['vocab_size'] - 1} SentencePiece pieces plus the CTC blank (id {config['blank_id']})",
        f"- Input: {frontend['kind']} features, {frontend['feature_dim']} per frame every "
        f"{frontend['frame_shift_ms']:g} ms, from {frontend['sample_rate']} Hz mono audio",
        f"- Checkpoint: the run's {config['checkpoint']['which']}, step {config['checkpoint']['step']}, epoch "
        f"{config['checkpoint']['epoch']}",
        "",
        "## Training data",
        *(f"- `{m}`" for m in manifests),
        *([f"- {final['train_audio_hours']:g} hours of audio"] if "train_audio_hours" in final else []),
        "",
        "## Training",
        f"- {final.get('epochs', optim.get('epochs'))} epochs"
        + (f", {final['steps']} optimizer steps" if "steps" in final else "")
        + f"; {_schedule_words(optim)}",
        f"- Batches of at most {data.get('adaptive_batch_budget')} {data.get('adaptive_batch_unit', 'padded-frames')} "
        f"and {data.get('adaptive_batch_max_samples')} utterances per rank; precision "
        f"{training.get('run', {}).get('precision', 'f32')}; seed {training.get('run', {}).get('seed')}",
        "- The full resolved configuration is `training_config.json`.",
        "",
        "## Evaluation",
        *_metrics_lines(final, metrics.get("evaluate") or {}),
        "",
        "## Intended use",
        "Transcribing speech like the training data (language, vocabulary, speakers, recording conditions) into "
        "lower-case words without punctuation, and as a starting point for fine-tuning on such data.",
        "",
        "## Limitations",
        *(_demo_limits() if demo else []),
        f"- Trained on {final.get('train_audio_hours', 'an unknown number of')} hours: accuracy drops on other "
        "accents, vocabularies, noise and channels than the training data's; check the error rates on your own "
        "audio before relying on it.",
        "- No punctuation, casing or speaker attribution; word times come from CTC frames and are approximate.",
        "",
        "## How to use",
        "```bash",
        f"asr-pipeline transcribe --run-dir {folder_name} recording.wav --output srt",
        "```",
        "```python",
        "from asr_pipeline.models.loading import load_run_model",
        f'model = load_run_model("{folder_name}")  # .model, .blank_id, .architecture',
        "```",
        "",
    ]
    return "\n".join(header + lines) + "\n"


def _schedule_words(optim: Mapping[str, Any]) -> str:
    rate = optim.get("learning_rate")
    peak = f"peak learning rate {rate:g}" if rate is not None else "the architecture's recipe learning rate"
    if optim.get("lr_warmup_steps") is not None:
        return f"{peak} after {optim['lr_warmup_steps']} warmup steps"
    if optim.get("lr_warmup_epochs") is not None:
        return f"{peak} after {optim['lr_warmup_epochs']} warmup epochs"
    return peak


def _output_words(output: str) -> str:
    return OUTPUTS[output].described_as


def _metrics_lines(final: Mapping[str, Any], evaluate: Mapping[str, Any]) -> list[str]:
    lines = []
    if "val_wer" in final:
        lines.append(
            f"Validation after the last epoch (greedy): WER {final['val_wer']:.2f} %, CER {final['val_cer']:.2f} %."
        )
    if evaluate:
        lines += ["", "| split | decoder | WER % | CER % |", "|---|---|---|---|"]
        for split, result in evaluate.items():
            for decoder, rates in result.items():
                if isinstance(rates, dict) and "wer" in rates:
                    lines.append(f"| {split} | {decoder} | {rates['wer']:.2f} | {rates['cer']:.2f} |")
    return lines or ["No evaluation metrics were given at export."]


def _demo_limits() -> list[str]:
    return [
        "- **A demonstration model.** Its training data is the built-in demo corpus: synthetic espeak-ng speech of "
        "generated sentences. It does not transcribe real recordings usefully.",
    ]


__all__ = ["CARD_FILE", "EXPORT_FILES", "CardInfo", "check_output", "export_run", "model_card"]
