"""The registered pipelines: one per DVC stage, and a default run that never synthesizes the demo corpus nor
runs the alignment or HuBERT recipes (their stages run one iteration at a time, with <section>.current)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing

import pytest
from kedro.framework.project import configure_project
from kedro.io import CatalogConfigResolver
from kedro.pipeline import Pipeline

from asr_pipeline.config_loader import ParamsYamlConfigLoader
from asr_pipeline.pipeline_registry import OPTIONAL_PIPELINES
from asr_pipeline.pipelines.splits import CONDITION_SPLITS, SPLITS
from tests.conftest import PROJECT_ROOT


@pytest.fixture(scope="module")
def pipelines() -> dict[str, Pipeline]:
    configure_project("asr_pipeline")  # find_pipelines looks up the configured package
    from asr_pipeline.pipeline_registry import register_pipelines

    return register_pipelines()


def test_there_is_one_pipeline_per_dvc_stage_and_a_default(pipelines):
    assert set(pipelines) == {
        "__default__", "demo_corpus", "transcripts", "tokenizer", "features", "conditions", "index", "lm", "train",
        "tune_decoding", "evaluate", "alignment_align", "alignment_train", "hubert_units", "hubert_pretrain",
        "hubert_validate", "hubert_abx", "pron_phones", "finetune", "hf_finetune", "pron_aligner", "pron_corpus",
    }  # fmt: skip


def test_a_plain_kedro_run_leaves_the_demo_out_and_runs_every_other_stage(pipelines):
    default_nodes = {node.name for node in pipelines["__default__"].nodes}

    assert "synthesize_demo_corpus" not in default_nodes
    assert "demo_corpus_files" not in pipelines["__default__"].all_outputs()
    assert (
        not {
            "align_iteration",
            "train_iteration",
            "make_units",
            "pretrain",
            "validate_checkpoints",
            "score_layers",
        }
        & default_nodes
    )
    for name, pipeline in pipelines.items():
        if name not in ("__default__", "demo_corpus", *OPTIONAL_PIPELINES):
            assert {node.name for node in pipeline.nodes} <= default_nodes, name


# The stages whose nodes compute without torch (features and conditions import it only to compute fbank,
# train only in its torchrun workers).
TORCH_FREE_STAGES = (
    "demo_corpus", "transcripts", "tokenizer", "features", "conditions", "index", "lm", "train", "pron_corpus",
    "pron_phones",
)  # fmt: skip


def test_a_torch_free_stage_starts_without_importing_torch():
    # What `kedro run --pipelines=<stage>` imports before its nodes run: the project's CLI module (kedro looks
    # for `<package>.cli`) and the requested pipeline. Torch's import alone is ~3 s of each stage's start.
    code = (
        "import json, sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from kedro.framework.project import configure_project, find_pipelines\n"
        "configure_project('asr_pipeline')\n"
        "import asr_pipeline.cli\n"
        "imported = {'cli': 'torch' in sys.modules}\n"
        f"for stage in {TORCH_FREE_STAGES!r}:\n"
        "    find_pipelines(raise_errors=True, pipelines_to_find=[stage])\n"
        "    imported[stage] = 'torch' in sys.modules\n"
        "print('imported torch:', json.dumps(imported))\n"  # kedro logs to stdout too
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    [line] = [line for line in result.stdout.splitlines() if line.startswith("imported torch: ")]

    imported = json.loads(line.removeprefix("imported torch: "))
    assert imported == dict.fromkeys(("cli", *TORCH_FREE_STAGES), False)


def test_a_node_that_declares_no_outputs_returns_nothing(pipelines):
    # Kedro drops such a node's return value with a UserWarning on every run; a stage that writes its results
    # itself (a DVC metric beside its outputs) says so by returning None.
    without_outputs = {
        node.name: node.func for pipeline in pipelines.values() for node in pipeline.nodes if not node.outputs
    }

    assert {"finetune_run", "train_aligner", "phone_alignments", "score_layers"} <= set(without_outputs)
    assert {
        name: hint
        for name, func in without_outputs.items()
        if (hint := typing.get_type_hints(func).get("return", "missing")) is not type(None)
    } == {}


def test_every_dotted_dataset_name_is_a_splits_dataset_in_the_catalog(pipelines):
    # What lets asr_pipeline.pipelines ignore Kedro's warning on dotted names: each one is <split>.<name> and the
    # catalog declares it (an entry or a "{split}.<name>" pattern), so a typo such as "dev.featureshards" cannot
    # pass silently as an unsaved MemoryDataset.
    catalog = ParamsYamlConfigLoader(str(PROJECT_ROOT / "conf"), env="base", base_env="base")["catalog"]
    resolver = CatalogConfigResolver(config=catalog)
    dotted = {
        name
        for pipeline in pipelines.values()
        for node in pipeline.nodes
        for name in (*node.inputs, *node.outputs)
        if "." in name and not name.startswith("params:")
    }

    assert {"train.feature_shards", "dev.manifest", "test_noisy.feature_shards", "test.phones"} <= dotted
    assert {name for name in dotted if name.split(".")[0] not in SPLITS + CONDITION_SPLITS} == set()
    assert {
        name for name in dotted if name not in catalog and not resolver.match_dataset_pattern(name)
    } == set()


def test_a_stage_run_prints_no_warning_about_dotted_dataset_names():
    # `kedro registry describe` builds the stage's pipeline as `kedro run --pipelines=<stage>` does (each DVC
    # stage), with Kedro's logging: the warning would be a ten-line box in every stage's log of `make demo`.
    for stage in ("train", "transcripts"):  # a node outside any namespace; one beside the split namespaces
        result = subprocess.run(
            [sys.executable, "-m", "kedro", "registry", "describe", stage],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "COLUMNS": "200"},
        )
        assert "Nodes:" in result.stdout, result.stdout  # it built the pipeline
        assert "dataset names contain" not in result.stdout + result.stderr, stage
