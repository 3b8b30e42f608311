"""The demo corpus, trained by each architecture with the demo's own recipe: params, seconds per epoch, and
greedy and beam+LM test CER/WER, side by side in one run (issue 10's comparison table).

Reads what `make demo` (or `dvc repro`) left: the tokenizer, the fbank shards of every split, the transcript
manifests and the KenLM binary under data/. Each architecture trains exactly as the train stage would
(params.yaml ``train`` with ``model.architecture``/``variant`` replaced, ``--epochs`` and ``--hold-steps``
for every architecture alike), on its own frontend's features: W2V-BERT's 160-dim shards are extracted from
the same manifests into ``OUT/features-w2v-bert`` first (once). The `evaluate` stage's node then scores the
test split with params.yaml ``evaluate`` (beam width, LM weight, word bonus).

    .venv/bin/python benchmarks/compare_architectures.py --out runs/compare              # all three
    .venv/bin/python benchmarks/compare_architectures.py --architectures zipformer --epochs 4

Runs go one after another (each uses the machine's cores through its own torchrun job), so seconds per
epoch are comparable only when nothing else runs; the table says how many epochs and steps each took.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import polars as pl
import yaml

from asr_pipeline.data.length_index import build_length_index
from asr_pipeline.io.datasets import FeatureShardsDataset
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.models.registry import frontend_of
from asr_pipeline.pipelines.evaluate.nodes import evaluate_split
from asr_pipeline.pipelines.features.nodes import extract_features
from asr_pipeline.pipelines.train.nodes import train_model

DATA = Path("data")
SPLITS = ("train", "dev", "test")


def feature_dirs(architecture: str, params: dict, out: Path) -> dict[str, Path]:
    """The shard folders of ``architecture``'s frontend: the demo's fbank shards, or extracted once."""
    frontend = frontend_of(architecture)
    if frontend == "fbank":
        return {split: DATA / "04_features" / split for split in SPLITS}
    dirs = {split: out / f"features-{frontend}" / split for split in SPLITS}
    tokenizer = (DATA / "03_tokenizer" / "tokenizer.model").read_bytes()
    for split, folder in dirs.items():
        if any(folder.glob("shard-*.parquet")):
            continue
        started = time.perf_counter()
        dataset = FeatureShardsDataset(str(folder))
        manifest = pl.read_parquet(DATA / "02_transcripts" / f"{split}.parquet")
        features = {**params["features"], "architecture": architecture}
        for chunk, _report in extract_features(manifest, tokenizer, features, params["tokenizer"]):
            dataset.save(chunk)
        print(f"[compare] {frontend} features of {split}: {time.perf_counter() - started:.0f} s", flush=True)
    return dirs


def shards(folder: Path) -> list[str]:
    return [str(path) for path in sorted(folder.glob("shard-*.parquet"))]


def train(architecture: str, variant: str, params: dict, dirs: dict, args, run_dir: Path) -> dict:
    """The train stage's own node on these shards, with the model and epochs replaced (no DVCLive curves)."""
    section = params["train"]
    optim = {**section.get("optim", {}), "epochs": args.epochs}
    if args.hold_steps is not None:
        optim["lr_hold_steps"] = args.hold_steps
    stage_params = {
        **section,
        "model": {"architecture": architecture, "variant": variant},
        "optim": optim,
        "run": {**section.get("run", {}), "dvclive": False},
    }
    train_shards, val_shards = shards(dirs["train"]), shards(dirs["dev"])
    length_index = pl.from_arrow(build_length_index(train_shards + val_shards))
    tokenizer = (DATA / "03_tokenizer" / "tokenizer.model").read_bytes()
    run_dir.mkdir(parents=True, exist_ok=True)  # the catalog's DirectoryDataset makes it for the stage
    metrics, _ = train_model(train_shards, val_shards, length_index, tokenizer, run_dir, stage_params)
    return metrics


def epoch_seconds(run_dir: Path) -> list[float]:
    """Wall seconds of each epoch: from the ``data`` event (or the previous epoch end) to its ``epoch`` event."""
    log = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    marks = [e["time"] for e in log if e["type"] in ("data", "epoch")]
    return [later - earlier for earlier, later in itertools.pairwise(marks)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--architectures",
        nargs="+",
        default=["squeezeformer:demo", "zipformer:demo", "w2v-bert:demo"],
        help="ARCHITECTURE[:VARIANT], variant demo when not given",
    )
    parser.add_argument("--epochs", type=int, default=None, help="default: params.yaml train.optim.epochs")
    parser.add_argument("--hold-steps", type=int, default=None, help="default: params.yaml's lr_hold_steps")
    parser.add_argument("--out", default="runs/compare")
    args = parser.parse_args()
    params = yaml.safe_load(Path("params.yaml").read_text())
    args.epochs = args.epochs or params["train"]["optim"]["epochs"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = (DATA / "03_tokenizer" / "tokenizer.model").read_bytes()
    # Decoded with the values tune_decoding chose on dev for the demo's own model (`dvc repro` first).
    tuned = json.loads((DATA / "08_tuning" / "decoding.json").read_text())
    decoding_files = (
        DATA / "03_tokenizer" / "lexicon.txt",
        DATA / "06_lm" / "lm.binary",
        DATA / "06_lm" / "tokens_lm.binary",
    )
    rows = []
    for entry in args.architectures:
        architecture, _, variant = entry.partition(":")
        variant = variant or "demo"
        dirs = feature_dirs(architecture, params, out)
        run_dir = out / f"{architecture}-{variant}"
        metrics = train(architecture, variant, params, dirs, args, run_dir)
        seconds = epoch_seconds(run_dir)
        model = load_run_model(run_dir).model
        _, scores = evaluate_split(
            run_dir, shards(dirs["test"]), tokenizer, *decoding_files, tuned, params["decoding"]
        )
        row = {
            "architecture": architecture,
            "variant": variant,
            "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
            "epochs": args.epochs,
            "steps": metrics["steps"],
            "sec_per_epoch": sum(seconds) / len(seconds),
            "val_cer": metrics.get("val_cer"),
            "test_greedy": scores["greedy"],
            "test_beam_lm": scores["lexicon"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "compare.json").write_text(json.dumps(rows, indent=1))
    print(
        "| architecture | variant | params | epochs | s/epoch | greedy CER | greedy WER | beam+LM CER | beam+LM WER |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    for r in rows:
        greedy, beam = r["test_greedy"], r["test_beam_lm"]
        print(
            f"| {r['architecture']} | {r['variant']} | {r['params_m']:.2f} M | {r['epochs']} | "
            f"{r['sec_per_epoch']:.0f} | {greedy['cer']:.2f} | {greedy['wer']:.2f} | {beam['cer']:.2f} | "
            f"{beam['wer']:.2f} |"
        )


if __name__ == "__main__":
    main()
