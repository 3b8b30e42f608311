"""The alignment recipe as DVC stages (dvc.yaml's align@<it> and train_ce@<it>, one pair per entry of
params.yaml alignment.iterations) on a tiny copy of this project: none by default, both iterations after the
train stage once configured, each alignment a cached output, and a change to the second iteration's params
reruns only that iteration; a recipe that starts from the linear alignment needs no train stage."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from tests.test_dvc_pipeline import TINY_PARAMS, copy_project, edit_params, run, stages_run

ALIGNMENT = {
    "batch_size": 8,
    "iterations": {
        "iter1": {"align_with": "data/07_train/run", "train": {"optim": {"epochs": 1}}},
        "iter2": {"align_with": "data/10_alignment/iter1/run", "train": {"optim": {"epochs": 1}}},
    },
}


def test_the_project_has_no_iterations_by_default():
    from tests.conftest import PROJECT_ROOT

    assert yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())["alignment"]["iterations"] == {}


@pytest.mark.slow  # ~1.5 min of real dvc repro over two iterations: in `make test-all`
def test_the_recipe_runs_both_iterations_and_reruns_only_what_a_change_touches(tmp_path):
    project = copy_project(tmp_path / "project", {**TINY_PARAMS, "alignment": ALIGNMENT})

    stages = stages_run(run(["dvc", "repro", "train_ce"], project).stdout)

    assert {"align@iter1", "train_ce@iter1", "align@iter2", "train_ce@iter2", "train"} <= stages
    assert not stages & {"lm", "tune_decoding"}, "only what the recipe needs"
    for iteration in ("iter1", "iter2"):
        folder = project / "data" / "10_alignment" / iteration
        report = json.loads((folder / "alignment" / "report.json").read_text())
        table = pq.read_table(folder / "alignment" / "alignment.parquet")
        assert report["iteration"] == iteration and report["aligned"] == table.num_rows > 0
        config = json.loads((folder / "run" / "training_config.json").read_text())
        assert config["data"]["alignment"].endswith(f"10_alignment/{iteration}/alignment/alignment.parquet")
    assert stages_run(run(["dvc", "repro", "train_ce"], project).stdout) == set(), "nothing to rerun"

    edit_params(
        project, {"alignment": {"iterations": {"iter2": {"train": {"optim": {"learning_rate": 5e-4}}}}}}
    )

    assert stages_run(run(["dvc", "repro", "train_ce"], project).stdout) == {"train_ce@iter2"}


@pytest.mark.slow  # ~1 min of real dvc repro: in `make test-all`
def test_a_recipe_bootstrapped_from_the_linear_alignment_runs_under_dvc_without_the_train_stage(tmp_path):
    boot = {"boot": {"align_with": "conf/aligners/linear.yaml", "train": {"optim": {"epochs": 1}}}}
    project = copy_project(
        tmp_path / "project", {**TINY_PARAMS, "alignment": {**ALIGNMENT, "iterations": boot}}
    )

    stages = stages_run(run(["dvc", "repro", "train_ce"], project).stdout)

    assert {"align@boot", "train_ce@boot"} <= stages and "train" not in stages, "no CTC run to align with"
    report = json.loads(
        (project / "data" / "10_alignment" / "boot" / "alignment" / "report.json").read_text()
    )
    assert report["aligned"] > 0 and report["mean_score_per_frame"] is None, "no model scored the path"
    assert (project / "data" / "10_alignment" / "boot" / "run" / "checkpoint_latest.json").is_file()

    edit_params(project, {"train": {"model": {"variant": "small"}}})

    assert "align@boot" in json.loads(run(["dvc", "status", "--json"], project).stdout), "its frames changed"
