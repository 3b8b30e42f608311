"""A HuBERT pretraining iteration's entry of params.yaml ``hubert.iterations``, shared by its four stages
(hubert_units, hubert_pretrain, hubert_validate, hubert_abx)."""

from __future__ import annotations

from typing import Any

from asr_pipeline.iterations import iteration_params

TARGETS = {"mfcc": 2, "layer": 1}  # targets -> decimation to the model's 50 Hz (MFCC frames are 10 ms)


def hubert_iteration(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The iteration this run is for (``hubert.current``) and its entry of ``hubert.iterations``, which must
    have ``units`` and ``train`` (each tracked by its stage in dvc.yaml; ``{}`` for the defaults)."""
    name, iteration = iteration_params(params, "hubert", "hubert_units")
    missing = [key for key in ("units", "train") if not isinstance(iteration.get(key), dict)]
    if missing:
        raise ValueError(
            f"hubert.iterations.{name} needs {' and '.join(missing)} (a mapping each, {{}} for the defaults): "
            "dvc.yaml tracks them by name"
        )
    return name, iteration
