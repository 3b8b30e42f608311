"""Nodes of the `demo_corpus` stage."""

from __future__ import annotations

from asr_pipeline.demo.corpus import DemoCorpusParams, build_demo_corpus


def synthesize_demo_corpus(params: dict) -> tuple[dict[str, bytes], dict[str, bytes], dict[str, bytes]]:
    """Synthesize train (an audio folder with .txt sidecars) and dev/test (JSONL manifests + audio).

    Returns the files of each split keyed by path relative to that split's manifest folder.
    """
    files = build_demo_corpus(DemoCorpusParams.from_dict(params))
    train = {path.removeprefix("train/"): data for path, data in files.items() if path.startswith("train/")}
    dev = {path: data for path, data in files.items() if path.split("/")[0] in ("dev", "dev.jsonl")}
    test = {path: data for path, data in files.items() if path.split("/")[0] in ("test", "test.jsonl")}
    unassigned = set(files) - {f"train/{p}" for p in train} - set(dev) - set(test)
    if unassigned:
        raise ValueError(f"demo corpus produced files outside train/dev/test: {sorted(unassigned)[:5]}")
    return train, dev, test
