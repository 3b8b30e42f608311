"""A fine-tuned run as a folder ``from_pretrained`` loads, with its model card.

``export_finetuned`` writes::

    config.json, model.safetensors, generation_config.json   the fine-tuned model (a LoRA run's adapters
                                                              merged into the base weights: a plain model)
    tokenizer files, preprocessor_config.json                 the base model's tokenizer and feature extractor
    training_config.json                                      the run's options (hf_finetune.options)
    train_results.json                                        steps, best validation loss and perplexity, time
    eval_results.json                                         WER/CER before and after per split, when given
    README.md                                                 the model card (Hugging Face YAML header first)

It is written beside its destination and renamed into place, so a failed export leaves no half folder;
``publish.hub.publish_folder`` (``asr-pipeline publish``) uploads it as it is.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

from safetensors.torch import load_file

from asr_pipeline.hf_finetune.models import Pretrained, load_pretrained
from asr_pipeline.hf_finetune.options import hf_finetune_options
from asr_pipeline.hf_finetune.trainer import TRAIN_RESULTS, prepare_model
from asr_pipeline.models.lora import has_adapters, load_saved_weights, merge_adapters
from asr_pipeline.run_layout import (
    BEST_DIR,
    CARD_FILE,
    CONFIG_FILE,
    WEIGHTS_FILE,
    best_or_latest,
    committed_dir,
)

EVAL_RESULTS = "eval_results.json"


def load_finetuned(
    run_dir: str | Path, checkpoint: Literal["best", "latest"] = "best", merge: bool = True
) -> Pretrained:
    """The run's model at ``checkpoint`` (best: the lowest validation loss, latest when it never validated),
    rebuilt from its base model and options; a LoRA run's adapters merged unless ``merge`` is False."""
    run_dir = Path(run_dir)
    options = hf_finetune_options(json.loads((run_dir / CONFIG_FILE).read_text()), f"{run_dir / CONFIG_FILE}")
    pretrained = load_pretrained(options.model)
    prepare_model(pretrained, options)
    if checkpoint == "best" and best_or_latest(run_dir)[0] == "best":
        weights = run_dir / BEST_DIR / WEIGHTS_FILE
    else:
        weights = committed_dir(run_dir) / WEIGHTS_FILE
    load_saved_weights(pretrained.model, load_file(weights), str(weights))
    if merge and has_adapters(pretrained.model):
        merge_adapters(pretrained.model)
    if options.gradient_checkpointing:
        pretrained.model.gradient_checkpointing_disable()
        pretrained.model.config.use_cache = True
    pretrained.model.eval()
    return pretrained


def model_card(options: dict[str, Any], train: dict[str, Any], evaluation: dict[str, Any] | None) -> str:
    """README.md: YAML header (base model, tags, WER per split), what was trained, and the scores."""
    lines = ["---", "library_name: transformers", f"base_model: {options['model']}",
             "pipeline_tag: automatic-speech-recognition", "tags: [asr_pipeline, speech-recognition]", "---", "",
             f"# Fine-tuned {Path(options['model']).name}", "",
             f"Fine-tuned from `{options['model']}` with asr_pipeline's `hf_finetune` stage: method "
             f"**{options['method']}**"
             + (f" (LoRA r={options['lora_rank']}, alpha={options['lora_alpha']})" if options["method"] == "lora" else "")
             + f", learning rate {options['learning_rate']:g}, {train.get('steps')} steps. "
             f"Best validation loss {train.get('best_val_loss', float('nan')):.4f} "
             f"(perplexity {train.get('best_val_perplexity', float('nan')):.3f}); "
             f"{train.get('trainable_params')} of {train.get('total_params')} parameters trained.", ""]  # fmt: skip
    if evaluation:
        lines += [
            "| split | WER before | WER after | CER before | CER after | utterances |",
            "|---|---|---|---|---|---|",
        ]
        for split, scores in evaluation.items():
            before, after = scores.get("before", {}), scores.get("after", {})
            lines.append(f"| {split} | {before.get('wer', '-')} | {after.get('wer', '-')} | {before.get('cer', '-')} "
                         f"| {after.get('cer', '-')} | {after.get('utterances', '-')} |")  # fmt: skip
        lines.append("")
    lines += ["## Use", "", "```python", "from transformers import AutoFeatureExtractor, AutoModel, AutoTokenizer",
              "# the folder (or the Hub repo it was published to)", 'model = AutoModel.from_pretrained("<folder>")',
              "```", "", "Greedy `generate()` after the training prompt reproduces the scores above "
              "(`asr_pipeline.hf_finetune.evaluate`).", ""]  # fmt: skip
    return "\n".join(lines)


def export_finetuned(run_dir: str | Path, output: str | Path, *, checkpoint: Literal["best", "latest"] = "best",
                     evaluation: dict[str, Any] | None = None, overwrite: bool = False) -> Path:  # fmt: skip
    """Write ``output`` (module docstring) from the run in ``run_dir``; returns it. An existing ``output`` is
    replaced only with ``overwrite`` and only when it is an earlier export (it holds the card and options)."""
    run_dir, output = Path(run_dir), Path(output)
    if output.exists() and not (
        overwrite and (output / CARD_FILE).is_file() and (output / CONFIG_FILE).is_file()
    ):
        raise FileExistsError(
            f"{output} exists; pick a new folder, or pass --overwrite to replace an earlier export "
            "(a folder without its README.md and training_config.json is never replaced)"
        )
    pretrained = load_finetuned(run_dir, checkpoint)
    staging = output.with_name(f".{output.name}.export-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pretrained.model.save_pretrained(staging)  # config.json, model.safetensors, generation_config.json
    pretrained.tokenizer.save_pretrained(staging)
    pretrained.feature_extractor.save_pretrained(staging)
    options = json.loads((run_dir / CONFIG_FILE).read_text())
    train = json.loads((run_dir / TRAIN_RESULTS).read_text()) if (run_dir / TRAIN_RESULTS).is_file() else {}
    (staging / CONFIG_FILE).write_text(json.dumps(options, indent=2) + "\n")
    (staging / TRAIN_RESULTS).write_text(json.dumps(train, indent=2) + "\n")
    if evaluation is not None:
        (staging / EVAL_RESULTS).write_text(json.dumps(evaluation, indent=2) + "\n")
    (staging / CARD_FILE).write_text(model_card(options, train, evaluation))
    if output.exists():
        shutil.rmtree(output)
    staging.rename(output)
    return output


__all__ = [
    "EVAL_RESULTS",
    "export_finetuned",
    "load_finetuned",
    "model_card",
]
