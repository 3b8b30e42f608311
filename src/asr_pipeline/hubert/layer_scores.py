"""ABX of an iteration of the HuBERT recipe (``pipelines/hubert_abx`` shows the layout): the frames its units
were clustered from and every transformer layer of its best checkpoint (``validation/best.json``), scored on the
dev split's phone item file (``units/phones/dev.item``) with ``hubert.abx``; the table, the best layer (the
lowest mean of the within and across error rates) and the metrics are written beside them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from asr_pipeline.hubert.abx import abx_errors, layer_features
from asr_pipeline.hubert.iterations import TARGETS
from asr_pipeline.hubert.runs import dev_loader, load_kept_model, write_table
from asr_pipeline.hubert.units import shard_frames
from asr_pipeline.io.atomic import write_json_atomic
from asr_pipeline.io.shards import list_shards

log = logging.getLogger(__name__)

COLUMNS = ("features", "frequency", "within", "across")
MODEL_FREQUENCY = 50  # HuBERT's frames: a 320-sample stride at 16 kHz


def score_iteration_layers(root: Path, targets: str, seed: int = 0) -> None:
    """Score the units' ``targets`` features (mfcc or layer) and every layer of the iteration's best
    checkpoint under ``root`` on its dev item file; write the table, the best layer and the metrics."""
    item = root / "units" / "phones" / "dev.item"
    out = root / "abx"
    out.mkdir(parents=True, exist_ok=True)
    table = out / "scores.tsv"
    if not item.is_file():
        write_table(table, COLUMNS, [], digits=3)
        reason = f"{item} does not exist: the dev manifest names no espeak-ng voices to align phones with"
        write_json_atomic(root / "abx_metrics.json", {"reason": reason})
        log.warning("hubert_abx: %s", reason)
        return
    # The units' target features at their own rate: the model's 50 Hz times the decimation to it (MFCC: 100 Hz).
    frequency = MODEL_FREQUENCY * TARGETS[targets]
    features = {u: torch.tensor(f) for u, f in shard_frames(list_shards(root / "units" / "features" / "dev"))}
    rows = [{"features": targets, "frequency": frequency, **abx_errors(item, features, frequency, seed)}]
    log.info("ABX %s: %s", targets, rows[-1])

    best = json.loads((root / "validation" / "best.json").read_text())
    config, ctx, loader = dev_loader(root / "run")
    model, _ = load_kept_model(root / best["checkpoint"], config.model.architecture)
    layers = layer_features(model.to(ctx.device).hubert, loader, ctx.device)
    for number, features in enumerate(layers, 1):
        rows.append({"features": f"layer_{number}", "frequency": MODEL_FREQUENCY,
                     **abx_errors(item, features, MODEL_FREQUENCY, seed)})  # fmt: skip
        log.info("ABX layer %d of %d: %s", number, len(layers), rows[-1])

    write_table(table, COLUMNS, rows, digits=3)
    scored = [row for row in rows[1:] if row["within"] is not None or row["across"] is not None]
    if not scored:
        raise ValueError(
            f"{item}: no ABX cell in either speaker mode (a phone needs two instances and another phone in the "
            "same context, per speaker): the dev split is too small to score"
        )
    chosen = min(scored, key=lambda row: (mean_error(row), -int(row["features"][6:])))
    best_layer = {"layer": int(chosen["features"][6:]), "within": chosen["within"], "across": chosen["across"],
                  "checkpoint": best["checkpoint"], "step": best["step"]}  # fmt: skip
    write_json_atomic(out / "best_layer.json", best_layer)
    metrics = {targets: {k: rows[0][k] for k in ("within", "across")}, "best_layer": best_layer}
    write_json_atomic(root / "abx_metrics.json", metrics)


def mean_error(row: dict[str, Any]) -> float:
    values = [row[mode] for mode in ("within", "across") if row[mode] is not None]
    return sum(values) / len(values)


__all__ = ["COLUMNS", "MODEL_FREQUENCY", "mean_error", "score_iteration_layers"]
