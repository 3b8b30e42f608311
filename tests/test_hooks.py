"""``asr_pipeline.hooks``: a params.yaml mistake ends ``kedro run`` (the command every DVC stage runs) with one
line naming the key, not some 300 lines of rich traceback; ``ASR_PIPELINE_DEBUG=1`` brings the traceback back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import PROJECT_ROOT


@pytest.fixture(scope="module")
def project_with_a_typo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project's code and configuration with ``demo_corpus.train_sizez`` in params.yaml."""
    project = tmp_path_factory.mktemp("project")
    shutil.copy(PROJECT_ROOT / "pyproject.toml", project)
    shutil.copytree(PROJECT_ROOT / "conf", project / "conf")
    # Kedro puts <project>/src first on sys.path and refuses one outside the project: a copy of the code.
    shutil.copytree(PROJECT_ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__"))
    params = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    params["demo_corpus"]["train_sizez"] = params["demo_corpus"].pop("train_size")
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    return project


def kedro_run(project: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DVC_NO_ANALYTICS": "1", **env}
    if "ASR_PIPELINE_DEBUG" not in env:
        environment.pop("ASR_PIPELINE_DEBUG", None)
    kedro = Path(sys.executable).with_name("kedro")
    command = [str(kedro), "run", "--pipelines=demo_corpus", "--env=base"]
    return subprocess.run(command, cwd=project, env=environment, capture_output=True, text=True)


def test_a_params_typo_ends_kedro_run_with_one_line_naming_the_key_and_no_traceback(project_with_a_typo):
    result = kedro_run(project_with_a_typo)

    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "error: params.yaml demo_corpus: unknown option(s) ['train_sizez']; the known options"
    )
    assert last.endswith("(traceback: ASR_PIPELINE_DEBUG=1)")


def test_asr_pipeline_debug_shows_the_traceback_of_the_same_error(project_with_a_typo):
    result = kedro_run(project_with_a_typo, ASR_PIPELINE_DEBUG="1")

    assert result.returncode == 1
    assert "Traceback" in result.stderr and "unknown option(s) ['train_sizez']" in result.stderr


def test_a_training_stage_failed_by_our_error_on_a_rank_is_one_line_and_a_crash_keeps_its_traceback(
    monkeypatch,
):
    from asr_pipeline.errors import one_line
    from asr_pipeline.training.launch import TrainingFailedError

    monkeypatch.delenv("ASR_PIPELINE_DEBUG", raising=False)
    ours = TrainingFailedError(
        1, "run/training_config.json", "local rank 0: NothingKeptError: training: all 2\n  File"
    )
    crash = TrainingFailedError(
        1, "run/training_config.json", "local rank 1: RuntimeError: CUDA error\n  File"
    )

    assert one_line(ours) == (
        "training failed: torchrun exited with code 1 for config run/training_config.json; the first failure, "
        "local rank 0: NothingKeptError: training: all 2"
    )
    assert one_line(crash) is None
    monkeypatch.setenv("ASR_PIPELINE_DEBUG", "1")
    assert one_line(ours) is None
