"""The whole DAG through the real `dvc repro` on a tiny generated corpus, in temporary git clones.

One module-scoped project runs every stage once and pushes to a local-directory DVC remote; each test
then works in its own `git clone` + `dvc pull`, as a teammate would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from asr_pipeline.pipelines.splits import EVAL_SPLITS
from tests.conftest import PROJECT_ROOT

EVALUATIONS = {f"evaluate@{split}" for split in EVAL_SPLITS}
ALL_STAGES = {
    "demo_corpus",
    "transcripts",
    "tokenizer",
    "features",
    "conditions",
    "index",
    "lm",
    "pron_corpus",
    "pron_phones",
    "train",
    "tune_decoding",
    *EVALUATIONS,
}
TINY_PARAMS = {
    "demo_corpus": {
        "train_size": 24,
        "dev_size": 6,
        "test_size": 6,
        "test_open_size": 3,
        "max_duration_sec": 6.0,
    },
    "tokenizer": {"vocab_size": 48},
    "pron": {"demo": {"train_size": 3, "test_size": 2}},
    "features": {"shard_size": 16},
    "train": {
        "launch": {"nproc_per_node": 2},
        "data": {"adaptive_batch_budget": 3000, "adaptive_batch_max_samples": 8},
        "model": {"variant": "tiny"},
        "optim": {"epochs": 2, "lr_warmup_steps": 2},
        "run": {"log_every": 1},  # a tiny run has few steps: a point per step for the curves
        "validation": {"every_steps": 2, "log_samples": 2},
    },
    "decoding": {
        "beam_width": 4,
        "tune": {
            "lexicon": {"lm_weight": [0.5], "word_score": [0.0, 1.0]},
            "lexicon_free": {"lm_weight": [0.0, 0.3]},
        },
    },
}


def _env() -> dict[str, str]:
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DVC_NO_ANALYTICS": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("ASR_PIPELINE_FAIL_RANK", None)
    return env


def run(args: list[str], cwd: Path, check: bool = True, **env_overrides: str) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=cwd, env={**_env(), **env_overrides}, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} failed ({result.returncode}) in {cwd}:\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
        )
    return result


def stages_run(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


def _merge(base: dict, overrides: dict) -> dict:
    for key, value in overrides.items():
        base[key] = _merge(base.get(key, {}), value) if isinstance(value, dict) else value
    return base


def edit_params(project: Path, overrides: dict) -> None:
    path = project / "params.yaml"
    path.write_text(yaml.safe_dump(_merge(yaml.safe_load(path.read_text()), overrides), sort_keys=False))


def copy_project(project: Path, params: dict) -> Path:
    """This project's tracked and untracked-unignored files in ``project``, with ``params`` merged into
    params.yaml, committed in a fresh git repository. Not what a local ``make demo`` left untracked: its
    ``dvc.lock`` and ``data/metrics`` results would make the copy a run project, not this commit's."""
    tracked = run(["git", "ls-files", "-c"], PROJECT_ROOT).stdout.split()
    untracked = run(["git", "ls-files", "-o", "--exclude-standard"], PROJECT_ROOT).stdout.split()
    files = tracked + [
        name for name in untracked if name != "dvc.lock" and not name.startswith("data/metrics/")
    ]
    for name in files:
        if (PROJECT_ROOT / name).is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / name, project / name)
    edit_params(project, params)
    run(["git", "init", "-q"], project)
    git_commit(project, "tiny")
    return project


def git_commit(project: Path, message: str, *paths: str) -> None:
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "add", *(paths or ["-A"])], project)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", message], project)


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> Path:
    """A copy of this project at its current state, run through `dvc repro` and pushed to a remote."""
    root = tmp_path_factory.mktemp("dvc")
    project = copy_project(root / "origin", TINY_PARAMS)
    repro = run(["dvc", "repro"], project)
    (project / "repro.log").write_text(repro.stdout + repro.stderr)
    run(["dvc", "remote", "add", "-d", "team", str(root / "remote")], project)
    git_commit(project, "repro", "dvc.lock", ".dvc/config", "data/metrics")
    run(["dvc", "push"], project)
    return project


def clone(origin: Path, name: str) -> Path:
    target = origin.parent / name
    run(["git", "clone", "-q", str(origin), str(target)], origin.parent)
    run(["dvc", "pull"], target)
    return target


def test_repro_runs_every_stage_and_a_second_repro_reruns_nothing(origin):
    assert stages_run((origin / "repro.log").read_text()) == ALL_STAGES
    lock = yaml.safe_load((origin / "dvc.lock").read_text())
    assert set(lock["stages"]) == ALL_STAGES
    assert "up to date" in run(["dvc", "status"], origin).stdout
    assert stages_run(run(["dvc", "repro"], origin).stdout) == set()

    run_dir = origin / "data" / "07_train" / "run"
    for name in (
        "training_config.json",
        "events.jsonl",
        "checkpoint_latest.json",
        "checkpoint_latest/model.safetensors",
    ):
        assert (run_dir / name).is_file(), name
    metrics = json.loads(run(["dvc", "metrics", "show", "--json"], origin).stdout)
    shown = json.dumps(metrics)
    for key in ("greedy", "lexicon", "lexicon_free", "wer", "cer", "skipped", "hours", "chosen"):
        assert key in shown
    dev = json.loads((origin / "data" / "metrics" / "evaluate_dev.json").read_text())
    assert dev["utterances"] == 6
    assert set(dev["greedy"]) == set(dev["lexicon"]) == set(dev["lexicon_free"]) == {"wer", "cer"}
    tuning = json.loads((origin / "data" / "metrics" / "tune_decoding.json").read_text())
    assert dev["lexicon"] == tuning["lexicon"]["dev"], "evaluate on dev decodes with the values tuned on dev"
    open_test = json.loads((origin / "data" / "metrics" / "evaluate_test_open.json").read_text())
    assert open_test["utterances"] == 3, "the open test set: demo_corpus.test_open_size sentences"
    for condition in ("noisy", "telephone", "fast"):
        report = json.loads((origin / "data" / "metrics" / f"features_test_{condition}.json").read_text())
        assert report["kept"] == 6 and report["kept_with"][f"condition {condition}"] == {
            "count": 6,
            "share": 1.0,
        }


def test_dvc_plots_show_draws_the_training_curves_and_exp_show_lists_params_and_metrics(origin):
    events = [
        json.loads(line)
        for line in (origin / "data" / "07_train" / "run" / "events.jsonl").read_text().splitlines()
    ]
    validations = [e for e in events if e["type"] == "validation"]
    assert {e["values"]["trigger"] for e in validations} >= {"step"}, "train.validation reached the worker"
    assert all(len(e["values"]["samples"]) == 2 for e in validations)

    plots = json.loads(run(["dvc", "plots", "show", "--json"], origin).stdout)
    assert not plots.get("errors"), plots.get("errors")
    expected_points = {
        "loss": len([e for e in events if e["type"] in ("train", "validation")]),
        "learning_rate": len([e for e in events if e["type"] == "train"]),
        "grad_norm": len([e for e in events if e["type"] == "train"]),
        "throughput": len([e for e in events if e["type"] == "train"]),
        "val_cer": len(validations),
        "val_wer": len(validations),
    }
    for name, points in expected_points.items():
        [plot] = plots["data"][name]
        values = plot["content"]["data"]["values"]
        assert len(values) == points > 0, name
        assert all("step" in value for value in values), name

    [workspace] = [row for row in json.loads(run(["dvc", "exp", "show", "--json"], origin).stdout)
                   if row["rev"] == "workspace"]  # fmt: skip
    metrics = workspace["data"]["metrics"]["data/metrics/train.json"]["data"]
    assert {"train_loss", "val_cer", "val_wer", "steps"} <= set(metrics)
    params = workspace["data"]["params"]["params.yaml"]["data"]
    assert params["train"]["optim"]["epochs"] == 2 and params["train"]["validation"]["every_steps"] == 2

    # The README's readable table: a handful of columns, not ~100.
    keep = "Experiment|rev|train.optim.epochs|.*evaluate_test.json:(greedy|lexicon).wer"
    table = run(["dvc", "exp", "show", "--csv", "--drop", ".*", "--keep", keep], origin).stdout.splitlines()
    assert set(table[0].split(",")) == {
        "Experiment", "rev", "data/metrics/evaluate_test.json:greedy.wer",
        "data/metrics/evaluate_test.json:lexicon.wer", "train.optim.epochs",
    }  # fmt: skip


def test_a_stage_run_without_the_telemetry_variables_sends_nothing_and_changes_no_tracked_file(tmp_path):
    """Kedro telemetry is off in the project itself (``.telemetry``: ``consent: false``), not only through the
    Makefile's and CI's KEDRO_DISABLE_TELEMETRY: with it, every stage tried to reach heapanalytics.com and
    wrote a ``[tool.kedro_telemetry] project_id`` into pyproject.toml, whose hash is the set-up stamp."""
    project = copy_project(
        tmp_path / "project",
        {"demo_corpus": {"train_size": 2, "dev_size": 1, "test_size": 1, "test_open_size": 1}},
    )
    pyproject = (project / "pyproject.toml").read_bytes()
    env = {
        key: value for key, value in _env().items() if key not in ("KEDRO_DISABLE_TELEMETRY", "DO_NOT_TRACK")
    }

    result = subprocess.run(
        ["dvc", "repro", "demo_corpus"], cwd=project, env=env, capture_output=True, text=True
    )

    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-6000:]
    assert stages_run(log) == {"demo_corpus"}
    assert not re.findall(r".*(?:telemetry|heap|ConnectionError).*", log, re.IGNORECASE)
    assert (project / "pyproject.toml").read_bytes() == pyproject
    assert run(["git", "status", "--porcelain", "--untracked-files=no"], project).stdout == "", (
        "no tracked file changed"
    )


def test_teammate_pull_gives_clean_status_and_no_op_repro(origin):
    teammate = clone(origin, "teammate")
    assert "up to date" in run(["dvc", "status"], teammate).stdout
    assert stages_run(run(["dvc", "repro"], teammate).stdout) == set()
    assert (teammate / "data" / "04_features" / "train" / "shard-00000.parquet").is_file()


@pytest.fixture
def s3_server(monkeypatch):
    """A real S3-compatible server (moto's server mode) on 127.0.0.1 with an empty bucket; its URL."""
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "team"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=url).create_bucket(Bucket="team-cache")
    yield url
    server.stop()


def test_a_teammate_pulls_the_cached_stages_from_an_s3_remote(origin, s3_server):
    def add_remote(project: Path) -> None:  # what the README's S3 set-up says, kept in .dvc/config.local
        run(["dvc", "remote", "add", "--local", "s3team", "s3://team-cache/asr"], project)
        run(["dvc", "remote", "modify", "--local", "s3team", "endpointurl", s3_server], project)

    add_remote(origin)
    run(["dvc", "push", "-r", "s3team"], origin)
    teammate = origin.parent / "s3-teammate"
    run(["git", "clone", "-q", str(origin), str(teammate)], origin.parent)
    add_remote(teammate)
    run(["dvc", "pull", "-r", "s3team"], teammate)

    assert "up to date" in run(["dvc", "status"], teammate).stdout
    assert stages_run(run(["dvc", "repro"], teammate).stdout) == set()
    shard = Path("data") / "04_features" / "train" / "shard-00000.parquet"
    assert (teammate / shard).read_bytes() == (origin / shard).read_bytes()
    run(["dvc", "remote", "remove", "--local", "s3team"], origin)


@pytest.mark.slow  # ~2.5 min of real dvc repro: in `make test-all`, kept out of `make test`'s 15 minutes
def test_parameter_changes_rerun_only_the_stages_that_depend_on_them(origin):
    project = clone(origin, "params")
    edit_params(project, {"features": {"shard_size": 7}})
    assert stages_run(run(["dvc", "repro"], project).stdout) == {
        "features",
        "conditions",  # the condition splits are featurized with the same features params
        "index",
        "train",
        "tune_decoding",
        *EVALUATIONS,
    }
    # A new grid reruns the tuning; evaluate follows because the chosen values change (lm_weight 0.25 only).
    edit_params(project, {"decoding": {"tune": {"lexicon": {"lm_weight": [0.25]}}}})
    assert stages_run(run(["dvc", "repro"], project).stdout) == {"tune_decoding", *EVALUATIONS}
    tuned = json.loads((project / "data" / "08_tuning" / "decoding.json").read_text())
    assert tuned["lexicon"]["lm_weight"] == 0.25
    edit_params(project, {"decoding": {"batch_size": 3}})
    assert stages_run(run(["dvc", "repro"], project).stdout) == {"tune_decoding", *EVALUATIONS}


@pytest.mark.slow  # a two-rank train stage (~50 s here): in `make test-all`; test_ddp_training's failing rank in `make test`
def test_a_failing_training_rank_fails_the_stage_and_dvc_records_nothing(origin):
    project = clone(origin, "failing")
    lock_before = (project / "dvc.lock").read_text()
    edit_params(project, {"train": {"optim": {"epochs": 1}}})
    result = run(["dvc", "repro", "train"], project, check=False, ASR_PIPELINE_FAIL_RANK="1")
    assert result.returncode != 0
    assert "ASR_PIPELINE_FAIL_RANK" in result.stdout + result.stderr or "rank" in (
        result.stdout + result.stderr
    )
    assert (project / "dvc.lock").read_text() == lock_before
    assert "train" in run(["dvc", "status"], project).stdout


# Each a whole train stage (~40 s here): the singular alias in `make test-all` only.
@pytest.mark.parametrize(
    "flag", [pytest.param("--pipeline=train", marks=pytest.mark.slow), "--pipelines=train"]
)
def test_kedro_run_trains_with_the_same_resolved_config_as_dvc(origin, flag):
    project = clone(origin, f"kedro{flag.split('=')[0]}")
    config_path = project / "data" / "07_train" / "run" / "training_config.json"
    from_dvc = json.loads(config_path.read_text())
    run(["kedro", "run", flag, "--env=base"], project)
    assert json.loads(config_path.read_text()) == from_dvc
    assert (project / "data" / "07_train" / "run" / "checkpoint_latest.json").is_file()


def _changed_stages(project: Path) -> set[str]:
    """The stages `dvc status` lists, asked of DVC's Python API in this process (a `dvc` command costs a
    second more to start)."""
    from dvc.repo import Repo

    with contextlib.chdir(project), Repo() as repo:  # it names the stages relative to the working directory
        return set(repo.status())


def test_editing_a_module_makes_dvc_rerun_exactly_the_stages_that_import_it(origin, monkeypatch):
    from asr_pipeline import stage_deps
    from asr_pipeline.stage_deps import STAGE_ENTRY_MODULES, stage_code_deps

    project = clone(origin, "code")
    # The recipes' foreach stages have no instances here (alignment.iterations, hubert.iterations,
    # pron.aligners, finetune.runs and hf_finetune.runs are empty).
    foreach_stages = (
        "align", "train_ce", "hubert_units", "hubert_pretrain", "hubert_validate", "hubert_abx", "pron_aligner",
        "finetune", "hf_finetune",
    )  # fmt: skip
    stages = [stage for stage in STAGE_ENTRY_MODULES if stage not in foreach_stages]
    deps = {stage: set(stage_code_deps(stage)) for stage in stages}
    importers = {
        path: {stage for stage in stages if path in deps[stage]} for path in set().union(*deps.values())
    }
    # `python -m asr_pipeline.stage_deps --write` (what `make repro` runs first) on the clone's own sources, in
    # this process: its main() with the clone as the project.
    monkeypatch.setattr(stage_deps, "PROJECT_ROOT", project)
    monkeypatch.setattr(
        stage_deps, "SOURCE_ROOTS", {"asr_pipeline": project / "src", "asr_kernels": project / "kernels"}
    )

    def write_fingerprints() -> None:
        stage_deps.clear_caches()
        assert stage_deps.main(["--write"]) == 0

    # Every stage's fingerprint covers what it imports (tests/test_stage_deps.py, without DVC) and dvc.yaml names
    # each stage's own fingerprint file (ibid.): here DVC itself, on a few edits of each kind: one stage's own
    # node module, a foreach stage's (every evaluate@<split>), modules several stages share (among them the
    # tokenizer and shard I/O the hand-written lists used to miss for train, and settings for every stage),
    # and a Triton kernel.
    edited = [
        "src/asr_pipeline/pipelines/tokenizer/nodes.py",
        "src/asr_pipeline/pipelines/evaluate/nodes.py",
        "src/asr_pipeline/text/tokenizer.py",
        "src/asr_pipeline/io/shards.py",
        "kernels/asr_kernels/glu.py",
        "src/asr_pipeline/settings.py",
    ]
    try:
        for number, path in enumerate(edited):
            original = (project / path).read_text()
            (project / path).write_text(original + "\n# edited\n")
            if number == 0:  # DVC sees code only through the fingerprints: unwritten, an edit changes nothing
                assert _changed_stages(project) == set(), path
            write_fingerprints()  # of this edit alone: the one before is undone
            expected = {f"{s}@{i}" for s in importers[path] if s == "evaluate" for i in EVAL_SPLITS}
            expected |= {s for s in importers[path] if s != "evaluate"}
            assert _changed_stages(project) == expected, path
            (project / path).write_text(original)
        write_fingerprints()
        assert _changed_stages(project) == set()
    finally:
        stage_deps.clear_caches()  # of the clone's files: the roots go back when the test ends


# The features stage reruns whenever the architecture changes (its frontend follows train.model.architecture,
# features.architecture: null); params.yaml's zipformer and squeezeformer both eat fbank shards, so the same
# shards come out and DVC reruns no index.
@pytest.mark.slow  # ~1.5 min per architecture of real dvc repro: in `make test-all`
@pytest.mark.parametrize(
    ("architecture", "width", "index_reruns"), [("squeezeformer", 80, False), ("w2v-bert", 160, True)]
)
def test_switching_the_architecture_trains_it_on_its_own_frontends_features(
    origin, architecture, width, index_reruns
):
    project = clone(origin, f"arch-{architecture}")
    edit_params(project, {"train": {"model": {"architecture": architecture, "variant": "tiny"}}})

    expected = {"features", "conditions", "train", "tune_decoding", *EVALUATIONS} | (
        {"index"} if index_reruns else set()
    )
    assert stages_run(run(["dvc", "repro"], project).stdout) == expected
    config = json.loads((project / "data" / "07_train" / "run" / "training_config.json").read_text())
    assert (config["model"]["architecture"], config["data"]["input_dim"]) == (architecture, width)
    scores = json.loads((project / "data" / "metrics" / "evaluate_test.json").read_text())
    assert scores["utterances"] == 6 and set(scores["greedy"]) == {"wer", "cer"}
