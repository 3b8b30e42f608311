"""Nodes of the `demo_corpus` stage."""

from __future__ import annotations

from asr_pipeline.demo.corpus import DemoCorpusParams, build_demo_corpus


def synthesize_demo_corpus(params: dict) -> dict[str, bytes]:
    """Synthesize train (an audio folder with .txt sidecars) and dev/test (JSONL manifests + audio).

    Returns every file keyed by its path relative to the demo folder (``train/…``, ``dev.jsonl``,
    ``dev/…``); the catalog writes them under ``paths.demo`` and nowhere else.
    """
    return build_demo_corpus(DemoCorpusParams.from_dict(params))
