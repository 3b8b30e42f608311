"""`kedro viz` (kedro-viz) draws the project's DAG: its static build lists every stage's nodes."""

from __future__ import annotations

import json

from tests.test_dvc_pipeline import copy_project, run


def test_kedro_viz_build_draws_every_stage_and_its_datasets(tmp_path):
    project = copy_project(tmp_path / "project", {})

    run(["kedro", "viz", "build"], project)

    graph = json.loads((project / "build" / "api" / "main").read_text())
    tasks = {node["name"] for node in graph["nodes"] if node["type"] == "task"}
    assert {"normalize_manifest", "train_tokenizer", "extract_features", "index_feature_shards",
            "train_language_model", "train_model", "evaluate_split"} <= tasks  # fmt: skip
    datasets = {node["name"] for node in graph["nodes"] if node["type"] == "data"}
    assert {"tokenizer_model", "length_index", "trained_model"} <= datasets
    assert {p["id"] for p in graph["pipelines"]} >= {"__default__", "demo_corpus", "train", "evaluate"}
