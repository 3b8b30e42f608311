"""The HuBERT recipe's ``hubert_abx@<iteration>`` stage: ABX error rates, within and across speakers, of every
transformer layer of the iteration's best checkpoint (``validation/best.json``) and of the MFCC features the
units were clustered from, on the dev split's phone item file (``units/phones/dev.item``; ``hubert.abx``).

Layout under ``<hubert_dir>/<iteration>/``::

    abx/scores.tsv        features (the units' targets: mfcc or layer; layer_1 ... layer_L), frequency, within,
                          across (error %, chance 50)
    abx/best_layer.json   the layer with the lowest mean of the two: {"layer", "within", "across", "checkpoint"}
                          (a mode without any cell, on a small dev split, is empty in the table and left out)
    abx_metrics.json      MFCC's and the best layer's rates (a DVC metrics file)

A corpus without phone alignments (no item file: its dev manifest names no espeak-ng voices) gets the reason in
``abx_metrics.json`` and an empty table: ABX needs phone labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asr_pipeline.hubert.iterations import hubert_iteration
from asr_pipeline.hubert.layer_scores import score_iteration_layers


def score_layers(hubert_dir: Path, params: dict[str, Any]) -> None:
    """Score MFCC and every layer of the best checkpoint; write the table, the best layer and the metrics
    (``hubert.layer_scores.score_iteration_layers``)."""
    name, iteration = hubert_iteration(params)
    targets = iteration["units"].get("targets", "mfcc")
    seed = int((params.get("abx") or {}).get("seed", 0))
    score_iteration_layers(Path(hubert_dir) / name, targets, seed)


__all__ = ["score_layers"]
