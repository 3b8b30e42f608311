"""A ``finetune@<name>`` stage's run (``pipelines/finetune``): one entry of params.yaml ``finetune.runs``
featurized, trained from its base under torchrun, and scored before and after.

``corpus`` is either a split of our transcripts featurized under one of params.yaml ``conditions``, cut by
utterance id into training and validation parts (``featurize_corpus``), or
``{train_manifests: [...], val_manifests: [...]}``: any manifests the engine reads. The model section comes
from the base run, so only what changes needs saying; the run starts from ``base`` (``run.init_from``) with
the base run's tokenizer. ``training.finetune`` decides which weights train; this module only lays out the
stage's folder and its metrics.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from asr_pipeline.decoding.evaluation import decode_and_score, greedy_decoder, load_run, run_log_probs
from asr_pipeline.features.split import condition_mix, stream_split_shards
from asr_pipeline.io.shards import list_shards, shard_name, write_shard
from asr_pipeline.models.feature_options import extraction_options
from asr_pipeline.run_layout import (
    CONFIG_FILE,
    METRICS_FILE,
    TOKENIZER_FILE,
    best_or_latest,
    require_checkpoint,
    run_tokenizer,
)
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import deep_merge, resolve_config
from asr_pipeline.training.events import read_events
from asr_pipeline.training.launch import launch_options, run_training

STAGE_METRICS = "metrics.json"  # <name>/metrics.json: before/after scores, parameters, time, memory
ENTRY_KEYS = ("base", "corpus", "evaluate")

# What featurizing a split needs besides its manifest: the tokenizer model, params.yaml features and
# tokenizer, and the architecture whose frontend extracts (None: train.model.architecture).
Featurizing = tuple[bytes, dict, dict, str | None]


def validation_part(utterance_id: str, val_share: float) -> bool:
    """Whether an utterance goes to the validation part: a stable hash of its id, so the cut never moves."""
    digest = hashlib.sha256(utterance_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < val_share


def featurize_corpus(
    manifests: dict[str, pl.DataFrame],
    corpus: dict[str, Any],
    output: Path,
    shared: Featurizing,
    conditions: dict[str, Any],
) -> dict[str, list[str]]:
    """``corpus``'s split under its condition, cut into training and validation parts by utterance id, as
    feature shards under ``output/{train,val}``; returns their paths."""
    split, condition = corpus["split"], corpus["condition"]
    if split not in manifests:
        raise ValueError(f"finetune corpus split {split!r} is not one of {', '.join(manifests)}")
    if condition not in conditions or condition == "seed":
        named = ", ".join(name for name in conditions if name != "seed")
        raise ValueError(
            f"finetune corpus condition {condition!r} is not one of params.yaml conditions: {named}"
        )
    val_share = float(corpus.get("val_share", 0.2))
    if not 0.0 < val_share < 1.0:
        raise ValueError(f"finetune corpus val_share must be in (0, 1), got {val_share}")
    manifest = manifests[split]
    tokenizer_model, features_params, tokenizer_params, architecture = shared
    mix = condition_mix(condition, conditions[condition], int(conditions["seed"]))
    options = extraction_options({**features_params, "augmentation": mix}, architecture)
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=int(tokenizer_params.get("blank_id", 0)))
    in_val = pl.Series([validation_part(str(i), val_share) for i in manifest["id"]])
    paths: dict[str, list[str]] = {}
    for part, rows in (("train", manifest.filter(~in_val)), ("val", manifest.filter(in_val))):
        folder = output / part
        folder.mkdir(parents=True)
        for chunk, _ in stream_split_shards(rows, tokenizer, options):
            write_shard(chunk.table, folder / shard_name(chunk.index))
        paths[part] = [str(path) for path in list_shards(folder)]
    return paths


def greedy_scores(run_dir: Path, shards: list[str], checkpoint: str, batch_size: int = 16) -> dict[str, Any]:
    """Greedy WER/CER (percent) of ``run_dir``'s ``checkpoint`` on ``shards``."""
    run = load_run(run_dir, checkpoint)  # type: ignore[arg-type]
    tokenizer = CTCTokenizer(run_tokenizer(run_dir).read_bytes(), blank_id=run.blank_id)
    _, metrics = decode_and_score(
        run_log_probs(run, shards, batch_size), {"greedy": greedy_decoder(run, tokenizer)}
    )
    return {"utterances": metrics["utterances"], **metrics["greedy"], "checkpoint": checkpoint}


def corpus_manifests(
    corpus: dict[str, Any],
    data_dir: Path,
    manifests: dict[str, pl.DataFrame],
    shared: Featurizing,
    conditions: dict,
) -> dict[str, list[str]]:
    """The run's ``train_manifests`` and ``val_manifests``: a split featurized under ``data_dir``, or the
    manifests the entry names (recorded in ``data_dir/manifests.json``, the stage's data out)."""
    if "split" in corpus:
        paths = featurize_corpus(manifests, corpus, data_dir, shared, conditions)
        return {"train_manifests": paths["train"], "val_manifests": paths["val"]}
    named = {key: list(corpus[key]) for key in ("train_manifests", "val_manifests")}
    data_dir.mkdir()
    (data_dir / "manifests.json").write_text(json.dumps(named, indent=2) + "\n")
    return named


def finetune_config(
    train_params: dict[str, Any],
    overrides: dict[str, Any],
    base: Path,
    manifests_of: dict[str, list[str]],
    run_dir: Path,
):
    """The resolved TrainConfig: params.yaml ``train`` (but ``launch``) under the entry's ``train``, the base
    run's model section (whatever params.yaml train.model says now), its data and run dir."""
    sections = deep_merge({k: v for k, v in train_params.items() if k != "launch"}, overrides)
    if base.suffix != ".safetensors":
        sections["model"] = {
            **json.loads((base / CONFIG_FILE).read_text())["model"],
            **overrides.get("model", {}),
        }
    return resolve_config(
        {
            **sections,
            "data": {**sections.get("data", {}), **manifests_of, "length_index": None},
            "run": {
                **sections.get("run", {}),
                "output_dir": str(run_dir),
                "tokenizer": str(run_dir / TOKENIZER_FILE),
                "init_from": str(base),
            },
        }
    )


def run_finetune_entry(
    name: str,
    entry: dict[str, Any],
    root: Path,
    manifests: dict[str, pl.DataFrame],
    shared: Featurizing,
    conditions: dict[str, Any],
    train_params: dict[str, Any],
) -> dict[str, Any]:
    """Featurize the entry's corpus (when it is a split under a condition) under ``root/data``, fine-tune
    its base run on it through torchrun in ``root/run``, and score base and fine-tuned run on ``evaluate``;
    the metrics are written to ``root/metrics.json`` and returned. ``root`` is emptied first."""
    for key in ENTRY_KEYS:
        if key not in entry:
            raise ValueError(
                f"finetune.runs.{name} needs {key!r} (pipelines/finetune/nodes.py shows an entry)"
            )
    base = Path(entry["base"])
    if base.suffix != ".safetensors":
        base = require_checkpoint(base, f"finetune.runs.{name}.base")
    evaluate = [str(path) for path in list_shards(entry["evaluate"])]
    if not evaluate:
        raise ValueError(f"finetune.runs.{name}.evaluate={entry['evaluate']!r} holds no feature shards")
    shutil.rmtree(root, ignore_errors=True)  # a stage output starts empty
    run_dir = root / "run"
    run_dir.mkdir(parents=True)
    manifests_of = corpus_manifests(entry["corpus"], root / "data", manifests, shared, conditions)
    base_dir = base if base.suffix != ".safetensors" else None
    (run_dir / TOKENIZER_FILE).write_bytes(
        run_tokenizer(base_dir).read_bytes() if base_dir is not None else shared[0]
    )
    config = finetune_config(train_params, entry.get("train") or {}, base, manifests_of, run_dir)
    final = run_training(config, **launch_options(train_params.get("launch") or {}))
    metrics = {
        "name": name,
        "base_model": str(base),
        "evaluate": entry["evaluate"],
        "before": greedy_scores(base_dir, evaluate, "latest") if base_dir is not None else None,
        **finetuned_metrics(run_dir, evaluate, final),
    }
    (root / STAGE_METRICS).write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return metrics


def finetuned_metrics(run_dir: Path, evaluate: list[str], final: dict[str, Any]) -> dict[str, Any]:
    """The fine-tuned run's side of the stage metrics: its best checkpoint's scores on ``evaluate``, what
    trained (the run's "finetune" event), time and memory (its "summary" event) and how training ended."""
    described = next((e["values"] for e in read_events(run_dir, "finetune")), {})
    [summary] = (e["values"] for e in read_events(run_dir, "summary"))
    best, _ = best_or_latest(run_dir)
    return {
        "after": greedy_scores(run_dir, evaluate, best),
        "method": described.get("method"),
        "trainable_params": described.get("trainable_params"),
        "total_params": described.get("total_params"),
        "lora": described.get("lora"),
        "frozen_modules": described.get("frozen_modules"),
        "train_sec": round(summary["wall_sec"], 1),
        "peak_rss_mb": summary.get("peak_rss_mb"),
        "steps": final.get("steps"),
        **{key: final[key] for key in ("stopped_early", "best_epoch", "epochs_run") if key in final},
        "run_metrics": str(run_dir / METRICS_FILE),
    }


__all__ = [
    "STAGE_METRICS",
    "corpus_manifests",
    "featurize_corpus",
    "finetune_config",
    "finetuned_metrics",
    "greedy_scores",
    "run_finetune_entry",
    "validation_part",
]
