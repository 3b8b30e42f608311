"""A ``pron_aligner@<name>`` stage's run (``pipelines/pron_aligner``, whose docstring shows an entry): the
transcripts featurized with the entry's frontend into shards with phone targets, the SpeechAligner trained on
them through torchrun, and everything measured of it: greedy PER on dev and test, the GOP baseline and the
scoring heads on the pronunciation demo set, and its frame and boundary heads (``pron.aligner_heads``), the
aligner with them written as ``aligner.safetensors``; the metrics go to ``metrics.json`` beside them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import torch

from asr_pipeline.decoding.evaluation import load_run, run_log_probs
from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.transcribe import run_frontend
from asr_pipeline.features.extract import featurize_audio
from asr_pipeline.features.fbank_options import FbankOptions
from asr_pipeline.features.frontends import frontend_named
from asr_pipeline.features.split import stream_split_shards
from asr_pipeline.hubert.phone_items import align_manifest
from asr_pipeline.io.datasets import Manifest
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import iter_examples, list_shards, shard_name, write_shard
from asr_pipeline.models.feature_options import extraction_options
from asr_pipeline.models.loading import RunModel, load_run_model
from asr_pipeline.models.representations import encoder_states
from asr_pipeline.pron.aligner_data import phone_error_rate, with_phone_targets
from asr_pipeline.pron.aligner_heads import (
    ARCHITECTURE,
    HeadExample,
    HeadOptions,
    save_aligner,
    score_word_starts,
    train_heads,
)
from asr_pipeline.pron.evaluation import paired_difference
from asr_pipeline.pron.gop_evaluation import gop_agreement
from asr_pipeline.pron.scoring import ScoringOptions, examples_from, train_scoring_head
from asr_pipeline.pron.speechocean import iter_speechocean
from asr_pipeline.run_layout import best_or_latest
from asr_pipeline.text.phones import BLANK_ID, NUM_CLASSES
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import deep_merge, resolve_config
from asr_pipeline.training.events import read_events
from asr_pipeline.training.launch import launch_options, run_training

ALIGNER_FRONTENDS = ("mfcc", "fbank")  # MFCC-39, log-mel-80: their widths are features.frontends
STAGE_METRICS = "metrics.json"
ALIGNER_FILE = "aligner.safetensors"  # the aligner with its frame and boundary heads trained
SPLITS = ("train", "dev", "test")


def phone_shards(
    manifest: pl.DataFrame,
    phones: pl.DataFrame,
    output: Path,
    tokenizer_model: bytes,
    features_params: dict,
    tokenizer_params: dict,
    frontend: str,
) -> tuple[list[str], int]:
    """``manifest``'s utterances featurized with ``frontend`` into shards under ``output`` with phone targets;
    the shard paths and the number of utterances without phones left out."""
    targets = dict(zip(phones["id"].to_list(), phones["phone_ids"].to_list(), strict=True))
    options = extraction_options({**features_params, "frontend_name": frontend, "input_dim": None})
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=int(tokenizer_params.get("blank_id", 0)))
    output.mkdir(parents=True)
    dropped = 0
    for chunk, _ in stream_split_shards(manifest, tokenizer, options):
        table, left_out = with_phone_targets(chunk.table, targets)
        dropped += len(left_out)
        if table.num_rows:
            write_shard(table, output / shard_name(chunk.index))
    return [str(path) for path in list_shards(output)], dropped


def greedy_phone_error_rate(run: RunModel, shards: list[str], phones: pl.DataFrame) -> dict[str, Any]:
    """Greedy phone error rate (percent) of the loaded ``run`` on ``shards``."""
    references = dict(zip(phones["id"].to_list(), phones["phone_ids"].to_list(), strict=True))
    refs, hyps = [], []
    for batch in run_log_probs(run, shards):
        for utterance, ids in zip(
            batch.ids, greedy_decode(batch.log_probs, batch.lengths, BLANK_ID), strict=True
        ):
            refs.append(references[utterance])
            hyps.append(ids)
    return {"per": round(phone_error_rate(refs, hyps), 3), "utterances": len(refs)}


def gop_baseline(model, demo_dir: Path, frontend: str, features_params: dict) -> dict[str, Any]:
    """The GOP baseline (``pron.gop_evaluation``) on the pronunciation demo set's test split (held-out voices):
    Spearman/Pearson with 95% bootstrap intervals per level, and what was skipped."""
    read, scored = SkipReport(strict=False), SkipReport(strict=False)
    fbank = FbankOptions.from_dict(features_params.get("fbank"))
    utterances = iter_speechocean(demo_dir, "test", read)
    agreement = gop_agreement(model, utterances, frontend_named(frontend, fbank), scored)
    return {**agreement, "read": read.to_dict(), "scored": scored.to_dict()}


def scoring_heads(
    model, demo_dir: Path, frontend: str, features_params: dict, params: dict
) -> dict[str, Any]:
    """The scoring head (``pron.scoring``) on the demo set's train split, scored on its test split: on the aligner's
    representations once per CTC weight of ``params["ctc_weights"]`` (default 0 and 0.5), and on the encoder of
    each run in ``params["representations"]`` (ASR or fine-tuned HuBERT run dirs or exports; the aligner still
    aligns); each with its paired phone-level difference from the first aligner head. ``params`` holds
    ``ScoringOptions`` fields besides."""
    params = dict(params)
    weights = [float(w) for w in params.pop("ctc_weights", [0.0, 0.5])]
    encoders = [str(path) for path in params.pop("representations", [])]
    fbank = FbankOptions.from_dict(features_params.get("fbank"))
    front = frontend_named(frontend, fbank)

    def featurize(path: str):
        outcome = featurize_audio(path, front, None)
        return outcome.features, outcome.skip_reason

    splits, reports = {}, {}
    for split in ("train", "test"):
        read = SkipReport(strict=False)
        splits[split], skipped = examples_from(iter_speechocean(demo_dir, split, read), featurize)
        reports[split] = {**read.to_dict(), "not_featurized": len(skipped)}
    runs = {}
    for weight in weights:
        options = ScoringOptions.from_dict({**params, "ctc_weight": weight})
        runs[f"ctc_weight_{weight:g}"] = train_scoring_head(model, splits["train"], splits["test"], options)
    for path in encoders:
        options = ScoringOptions.from_dict({**params, "ctc_weight": 0.0})
        encoder = run_encoder(path)
        runs[f"encoder:{path}"] = train_scoring_head(model, splits["train"], splits["test"], options, encoder)
    result: dict[str, Any] = {"read": reports}
    for name, outcome in runs.items():
        result[name] = {key: value for key, value in outcome.items() if key != "predictions"}
    if len(runs) >= 2:
        (first, a), *others = list(runs.items())
        for second, b in others:
            pa, pb = a["predictions"]["phone"], b["predictions"]["phone"]
            if pa[1] == pb[1]:  # the same test phones in the same order (both align the same utterances)
                result[f"{first}_minus_{second}"] = paired_difference(pa[0], pb[0], pa[1])
    return result


def head_examples(shards: list[str], phones: pl.DataFrame) -> tuple[list[HeadExample], list[str]]:
    """The utterances of ``shards`` with their phones and words (the pron_phones table); the ids of those whose
    words do not hold their phones (no word boundaries to learn) are left out and returned."""
    words = dict(zip(phones["id"].to_list(), phones["word_phones"].to_list(), strict=True))
    examples, left_out = [], []
    for path in shards:
        for row in iter_examples(path):
            per_word = list(words.get(row["id"]) or [])
            if sum(per_word) != len(row["tokens"]):
                left_out.append(row["id"])
                continue
            examples.append(
                HeadExample(
                    row["id"], torch.from_numpy(row["features"].copy()), list(row["tokens"]), per_word
                )
            )
    return examples, left_out


def synthesizer_word_starts(
    raw_manifest: Manifest, features_params: dict, jobs: int
) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """Each utterance's true word starts as feature frames, when the raw manifest names its espeak-ng voice (the
    demo corpus; ``demo.phones``: the synthesizer's own word events), and the alignment's skip report. A frame
    stands for the time at its centre (``fbank`` frame shift and length)."""
    skips = SkipReport(strict=False)
    _, alignments = align_manifest(Path(raw_manifest.path), skips, jobs)
    fbank = FbankOptions.from_dict(features_params.get("fbank"))
    shift, length = fbank.frame_shift_ms, fbank.frame_length_ms
    truth = {
        utterance: [
            max(0, round((1000 * sample / alignment.sample_rate - length / 2) / shift))
            for sample in alignment.word_starts()
        ]
        for utterance, alignment in alignments.items()
    }
    return truth, skips.to_dict()


def aligner_heads(
    model,
    shards: dict[str, list[str]],
    train_phones: pl.DataFrame,
    test_phones: pl.DataFrame,
    test_raw_manifest: Manifest,
    features_params: dict,
    params: dict,
    path: Path,
) -> dict[str, Any]:
    """Train the aligner's frame and boundary heads (``pron.aligner_heads``) on the train split, score them on test
    (against the synthesizer's word starts too, where its raw manifest names the voices), write the aligner with
    them to ``path``; the report."""
    options = HeadOptions.from_dict(params)
    train, train_left_out = head_examples(shards["train"], train_phones)
    test, test_left_out = head_examples(shards["test"], test_phones)
    trained, report = train_heads(model, train, test, options)
    save_aligner(trained, path)
    truth, aligned = synthesizer_word_starts(test_raw_manifest, features_params, options.jobs)
    against_truth = (
        score_word_starts(trained, test, truth, options)
        if truth
        else {"reason": f"{test_raw_manifest.path}: no utterance names an espeak-ng voice its audio matches"}
    )
    left_out = {"train": len(train_left_out), "test": len(test_left_out)}
    return {
        **report,
        "test_word_starts": {**against_truth, "synthesizer": aligned},
        "without_word_phones": left_out,
        "file": path.name,
    }


def run_encoder(path: str):
    """An ``Encoder`` (``pron.scoring``): the run's own frontend on the utterance's audio, then its encoder's last
    hidden states (``models.representations``)."""
    run = load_run_model(path)
    front = run_frontend(run)

    def encode(example) -> torch.Tensor:
        features = featurize_audio(example.audio_path, front, None).features
        if features is None:
            raise ValueError(f"{example.audio_path}: the {run.architecture} frontend made no features of it")
        frames = torch.from_numpy(features)[None]  # (1, T, F)
        hidden, _ = encoder_states(run.model, run.architecture, frames, torch.tensor([frames.shape[1]]))
        return hidden[0]  # (T', D)

    return encode


def aligner_config(
    train_params: dict[str, Any],
    overrides: dict[str, Any],
    frontend: str,
    shards: dict[str, list[str]],
    run_dir: Path,
):
    """The resolved TrainConfig: params.yaml ``train`` (but ``launch`` and ``model``) under the entry's
    ``train``, the SpeechAligner over the phone inventory, trained on the train shards, validated on dev's."""
    sections = deep_merge({k: v for k, v in train_params.items() if k not in ("launch", "model")}, overrides)
    return resolve_config(
        {
            **sections,
            "model": {"architecture": ARCHITECTURE, **overrides.get("model", {}), "vocab_size": NUM_CLASSES},
            "data": {
                **sections.get("data", {}),
                "train_manifests": shards["train"],
                "val_manifests": shards["dev"],
                "input_dim": frontend_named(frontend).feature_dim,
                "length_index": None,
            },
            "run": {**sections.get("run", {}), "output_dir": str(run_dir), "tokenizer": None},
        }
    )


def train_aligner_entry(
    name: str,
    entry: dict[str, Any],
    root: Path,
    splits: dict[str, tuple[pl.DataFrame, pl.DataFrame]],
    test_raw_manifest: Manifest,
    shared: tuple[bytes, dict, dict],
    train_params: dict[str, Any],
    demo_dir: Path,
) -> dict[str, Any]:
    """Featurize ``splits`` (split -> its manifest and pron_phones table) with the entry's frontend under
    ``root/features``, train the aligner in ``root/run`` through torchrun, and measure it (module docstring);
    returns the metrics it writes to ``root/metrics.json``. ``shared``: the tokenizer model and params.yaml
    features and tokenizer. ``root`` is emptied first."""
    frontend = entry.get("frontend", "mfcc")
    if frontend not in ALIGNER_FRONTENDS:
        raise ValueError(
            f"pron.aligners.{name}.frontend must be one of {', '.join(ALIGNER_FRONTENDS)}, got {frontend!r}"
        )
    tokenizer_model, features_params, tokenizer_params = shared
    shutil.rmtree(root, ignore_errors=True)  # a stage output starts empty
    shards, dropped = {}, {}
    for split in SPLITS:
        manifest, phones = splits[split]
        shards[split], dropped[split] = phone_shards(
            manifest,
            phones,
            root / "features" / split,
            tokenizer_model,
            features_params,
            tokenizer_params,
            frontend,
        )
    run_dir = root / "run"
    config = aligner_config(train_params, entry.get("train") or {}, frontend, shards, run_dir)
    final = run_training(config, **launch_options(train_params.get("launch") or {}))
    [summary] = (e["values"] for e in read_events(run_dir, "summary"))
    best, pointer = best_or_latest(run_dir)
    run = load_run(run_dir, best)  # type: ignore[arg-type]
    metrics = {
        "name": name,
        "frontend": frontend,
        "input_dim": frontend_named(frontend).feature_dim,
        "parameters": sum(p.numel() for p in run.model.parameters()),
        **{
            split: {**greedy_phone_error_rate(run, shards[split], splits[split][1]), "checkpoint": best}
            for split in ("dev", "test")
        },
        "utterances_without_phones": dropped,
        "gop": gop_baseline(run.model, demo_dir, frontend, features_params),
        "scoring": scoring_heads(run.model, demo_dir, frontend, features_params, entry.get("scoring") or {}),
        "heads": aligner_heads(
            run.model,
            shards,
            splits["train"][1],
            splits["test"][1],
            test_raw_manifest,
            features_params,
            entry.get("heads") or {},
            root / ALIGNER_FILE,
        ),
        "steps": final.get("steps"),
        "best_epoch": pointer["epoch"] if best == "best" else None,
        "train_sec": round(summary["wall_sec"], 1),
        "peak_rss_mb": summary.get("peak_rss_mb"),
    }
    (root / STAGE_METRICS).write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return metrics


__all__ = [
    "ALIGNER_FILE",
    "ALIGNER_FRONTENDS",
    "STAGE_METRICS",
    "aligner_config",
    "aligner_heads",
    "gop_baseline",
    "greedy_phone_error_rate",
    "head_examples",
    "phone_shards",
    "run_encoder",
    "scoring_heads",
    "synthesizer_word_starts",
    "train_aligner_entry",
]
