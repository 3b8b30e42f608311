"""DVCLive curves never change a repository training was not asked to touch: outside a DVC project (a Git
checkout of someone else's, say) the logger writes its files without DVC integration."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from asr_pipeline.training.dvclive_logger import DVCLIVE_DIR, DVCLiveLogger, dvc_project_root

TRAIN_VALUES = {"loss": 2.5, "lr": 1e-3, "grad_norm": 4.0, "audio_seconds_per_sec": 90.0}


def git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def foreign_repo(tmp_path) -> Path:
    """Someone else's Git repository with one commit and no DVC."""
    repo = tmp_path / "their-project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("not ours\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def test_a_run_inside_a_foreign_git_repository_leaves_it_untouched(foreign_repo, monkeypatch):
    monkeypatch.chdir(foreign_repo)  # `asr-pipeline train --output-dir runs/x` started from their checkout
    status_before = git(foreign_repo, "status", "--porcelain")

    logger = DVCLiveLogger(foreign_repo / "runs" / "x")
    logger.on_event("train", 10, 0, TRAIN_VALUES)
    logger.close()

    assert not logger.dvc_integration
    assert not (foreign_repo / ".dvc").exists() and not (foreign_repo / ".dvcignore").exists()
    assert git(foreign_repo, "diff", "--cached", "--name-only") == "", "nothing staged"
    assert git(foreign_repo, "status", "--porcelain") == status_before + "?? runs/\n", (
        "only the run dir is new"
    )
    live = foreign_repo / "runs" / "x" / DVCLIVE_DIR
    assert (live / "plots" / "metrics" / "train" / "loss.tsv").read_text().splitlines() == [
        "step\tloss",
        "10\t2.5",
    ]
    assert json.loads((live / "metrics.json").read_text())["step"] == 10


def test_inside_a_dvc_project_the_logger_keeps_its_dvc_integration(foreign_repo, monkeypatch):
    from dvc.repo import Repo

    Repo.init(str(foreign_repo)).close()  # now it is a DVC project: ours to log into
    git(foreign_repo, "commit", "-q", "-m", "dvc init")
    (foreign_repo / "src").mkdir()
    monkeypatch.chdir(foreign_repo / "src")

    logger = DVCLiveLogger(foreign_repo / "runs" / "x")
    logger.on_event("train", 10, 0, TRAIN_VALUES)
    logger.close()

    assert logger.dvc_integration
    assert (foreign_repo / "runs" / "x" / DVCLIVE_DIR / "metrics.json").is_file()
    assert git(foreign_repo, "diff", "--cached", "--name-only") == ""


def test_a_closed_logger_leaves_no_descriptor_of_the_dvc_project_open(foreign_repo, monkeypatch):
    # One process may train many times (a Kedro session, the test suite): a run's DVC repository (state
    # databases, Git pack files) must not stay open after it, or a long process runs out of descriptors.
    from dvc.repo import Repo

    Repo.init(str(foreign_repo)).close()
    monkeypatch.chdir(foreign_repo)

    def run(name: str) -> None:
        logger = DVCLiveLogger(foreign_repo / "runs" / name)
        logger.on_event("train", 10, 0, TRAIN_VALUES)
        logger.close()
        assert logger.dvc_integration

    run("first")  # imports and process-wide caches: not a run's
    before = _open_descriptors()
    run("second")
    assert _open_descriptors() == before


def _open_descriptors() -> dict[int, str]:
    """This process's open descriptors, but those on /proc: another thread of the worker reading a process's
    /proc/<pid>/stat at that moment (CI once caught one) is not a descriptor a run left open."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, gone by now
            target = os.readlink(f"/proc/self/fd/{fd}")
            if not target.startswith("/proc/"):
                found[int(fd)] = target
    return found


def test_the_dvc_project_is_the_nearest_folder_above_holding_dvc(tmp_path):
    (tmp_path / "project" / ".dvc").mkdir(parents=True)
    (tmp_path / "project" / "a" / "b").mkdir(parents=True)

    assert dvc_project_root(tmp_path / "project" / "a" / "b") == tmp_path / "project"
    assert dvc_project_root(tmp_path) is None


def test_a_validation_scoring_the_averages_plots_them_beside_the_raw_weights_curve(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    values = {
        "val_loss": 1.5,
        "val_cer": 40.0,
        "val_wer": 80.0,
        "val_cer_averaged": 35.0,
        "val_loss_ema": 1.25,
    }

    logger = DVCLiveLogger(tmp_path / "run")
    logger.on_event("validation", 8, 1, values)
    logger.close()

    metrics = json.loads((tmp_path / "run" / DVCLIVE_DIR / "metrics.json").read_text())["val"]
    assert metrics == {"loss": 1.5, "cer": 40.0, "wer": 80.0, "cer_averaged": 35.0, "loss_ema": 1.25}
