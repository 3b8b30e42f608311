"""Nodes of the `pron_corpus` stage."""

from __future__ import annotations

from asr_pipeline.pron.demo_set import PronDemoParams, build_pron_demo_set


def synthesize_pron_demo_set(params: dict) -> dict[str, bytes]:
    """The labelled pronunciation demo set (``pron.demo_set``; params.yaml ``pron.demo``): every file keyed by its
    path relative to the set's folder; the catalog writes them under ``paths.pron_demo`` and nowhere else."""
    return build_pron_demo_set(PronDemoParams.from_dict(params))
