"""One ``hf_finetune@<name>`` entry, start to end: featurize, score the base model, train, score the
fine-tuned one, export. The Kedro node (``pipelines/hf_finetune``) and any other caller call ``run_entry``.

An entry of params.yaml ``hf_finetune.runs``::

    whisper_lora:
      train: data/01_raw/demo/train                  # any manifest form io.manifests reads
      val: data/01_raw/demo/dev.jsonl
      evaluate: {dev: data/01_raw/demo/dev.jsonl, test: data/01_raw/demo/test.jsonl,
                 test_noisy: {manifest: data/01_raw/demo/test.jsonl, condition: noisy}}
      options: {model: openai/whisper-small, method: lora, epochs: 3}   # hf_finetune.options

Layout under the stage's folder ``<name>/``: ``features/`` (the cache, kept across reruns: DVC ``persist``),
``run/`` (the run dir: emptied first, unless ``options.resume_from`` names the run to continue),
``export/`` (``hf_finetune.export``) and ``metrics.json``: per evaluated split the WER
and CER of greedy ``generate()`` before (the base model) and after (the best checkpoint, LoRA merged), with
the training results (steps, best validation loss and perplexity, parameters, time).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from asr_pipeline.augment.mix import AugmentationMix
from asr_pipeline.hf_finetune.evaluate import score, transcribe_shards
from asr_pipeline.hf_finetune.export import export_finetuned, load_finetuned
from asr_pipeline.hf_finetune.features import FeatureShards, condition_split, featurize
from asr_pipeline.hf_finetune.models import Pretrained, load_pretrained
from asr_pipeline.hf_finetune.options import HFFinetuneOptions, hf_finetune_options
from asr_pipeline.hf_finetune.trainer import FinetuneRun, pick_device
from asr_pipeline.hf_finetune.worker import launch_finetune
from asr_pipeline.io.atomic import write_json_atomic
from asr_pipeline.options import ConfigError
from asr_pipeline.run_layout import require_checkpoint

ENTRY_KEYS = ("train", "val", "evaluate", "options")
STAGE_METRICS = "metrics.json"


def check_entry(name: str, entry: dict[str, Any]) -> HFFinetuneOptions:
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    missing = [key for key in ("train", "options") if not entry.get(key)]
    if unknown or missing:
        raise ConfigError(
            f"hf_finetune.runs.{name}: {'unknown keys ' + str(unknown) if unknown else ''}"
            f"{'; ' if unknown and missing else ''}{'missing ' + str(missing) if missing else ''}; an entry has "
            f"{', '.join(ENTRY_KEYS)} (train and options.model required)"
        )
    return hf_finetune_options(entry["options"], f"hf_finetune.runs.{name}.options")


def scores(pretrained: Pretrained, splits: dict[str, Path], options: HFFinetuneOptions) -> dict[str, Any]:
    """WER/CER per split of ``pretrained``'s greedy transcripts, on the run's device."""
    pretrained.model.to(pick_device(options.device))
    return {split: score(transcribe_shards(pretrained, FeatureShards(folder, options.streaming), language=options.language,
                                           task=options.task, batch_size=options.batch_size,
                                           max_new_tokens=options.max_new_tokens))
            for split, folder in splits.items()}  # fmt: skip


def prepare_run_dir(run_dir: Path, resume_from: str | None) -> None:
    """``run_dir`` ready for the entry's training: emptied (a stage run starts afresh), or with
    ``resume_from`` the run to continue: ``run_dir`` itself, kept, or another run dir (its
    ``checkpoint_latest/`` or ``checkpoint_latest.json``), copied in to continue there."""
    if resume_from is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        return
    source = require_checkpoint(resume_from, "hf_finetune resume_from (--resume-from)")
    if source.resolve() != run_dir.resolve():
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(source, run_dir)


def evaluation_inputs(
    name: str, evaluate: dict[str, Any] | None, conditions: dict[str, Any] | None
) -> dict[str, tuple[str, AugmentationMix | None]]:
    """An entry's ``evaluate``: split -> (manifest, condition or None). A split is a manifest, or
    ``{manifest: M, condition: C}``: M's audio under params.yaml ``conditions.C`` (``features.condition_split``),
    the ``conditions`` stage's ``test_C`` split when M is the test manifest."""
    inputs = {}
    for split, spec in (evaluate or {}).items():
        if isinstance(spec, str):
            inputs[split] = (spec, None)
        elif isinstance(spec, dict) and set(spec) == {"manifest", "condition"}:
            inputs[split] = (spec["manifest"], condition_split(spec["condition"], conditions))
        else:
            raise ConfigError(
                f"hf_finetune.runs.{name}.evaluate.{split}: expected a manifest path or "
                f"{{manifest: PATH, condition: NAME}}, got {spec!r}"
            )
    return inputs


def run_entry(
    name: str, entry: dict[str, Any], folder: str | Path, conditions: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run the entry into ``folder`` (module docstring); returns and writes its metrics. ``conditions``:
    params.yaml ``conditions``, which the entry's condition splits name."""
    options, folder = check_entry(name, entry), Path(folder)
    evaluate = evaluation_inputs(name, entry.get("evaluate"), conditions)
    prepare_run_dir(folder / "run", options.resume_from)
    pretrained = load_pretrained(options.model)
    manifests = {"train": (entry["train"], None), **({"val": (entry["val"], None)} if entry.get("val") else {}),
                 **{f"evaluate/{split}": spec for split, spec in evaluate.items()}}  # fmt: skip
    cached = {what: featurize(path, pretrained.feature_extractor, folder / "features",
                              max_windows=pretrained.family.max_windows, max_audio_sec=options.max_audio_sec,
                              rows_per_shard=options.rows_per_shard, condition=condition)
              for what, (path, condition) in manifests.items()}  # fmt: skip
    evaluated = {
        what.split("/", 1)[1]: c.directory for what, c in cached.items() if what.startswith("evaluate/")
    }
    before = scores(pretrained, evaluated, options)
    val = cached["val"].directory if "val" in cached else None
    if options.nproc_per_node > 1:  # torchrun's ranks load the model themselves
        train = launch_finetune(options, cached["train"].directory, val, folder / "run", live=True)
    else:
        train = FinetuneRun(
            options, cached["train"].directory, val, folder / "run", pretrained=pretrained, live=True
        ).run()
    after = scores(load_finetuned(folder / "run"), evaluated, options)
    evaluation = {split: {"before": before[split], "after": after[split]} for split in evaluated}
    export_finetuned(folder / "run", folder / "export", evaluation=evaluation, overwrite=True)
    metrics = {
        "splits": {split: {"wer_before": s["before"]["wer"], "wer_after": s["after"]["wer"],
                           "cer_before": s["before"]["cer"], "cer_after": s["after"]["cer"],
                           "utterances": s["after"]["utterances"]} for split, s in evaluation.items()},
        "train": train,
        "features": {what: {"reused": c.reused, **c.report} for what, c in cached.items()},
    }  # fmt: skip
    write_json_atomic(folder / STAGE_METRICS, json.loads(json.dumps(metrics, default=str)))
    return metrics


__all__ = ["ENTRY_KEYS", "STAGE_METRICS", "check_entry", "evaluation_inputs", "prepare_run_dir", "run_entry"]
