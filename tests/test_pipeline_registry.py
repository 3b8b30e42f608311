"""The registered pipelines: one per DVC stage, and a default run that never synthesizes the demo corpus nor
runs the alignment or HuBERT recipes (their stages run one iteration at a time, with <section>.current)."""

from __future__ import annotations

import json
import subprocess
import sys
import typing

import pytest
from kedro.framework.project import configure_project
from kedro.pipeline import Pipeline

from asr_pipeline.pipeline_registry import OPTIONAL_PIPELINES


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
    without_outputs = {node.name: node.func for node in pipelines["__default__"].nodes if not node.outputs}
    for name in OPTIONAL_PIPELINES:
        without_outputs |= {node.name: node.func for node in pipelines[name].nodes if not node.outputs}

    assert {"finetune_run", "train_aligner", "phone_alignments", "score_layers"} <= set(without_outputs)
    assert {
        name: hint
        for name, func in without_outputs.items()
        if (hint := typing.get_type_hints(func).get("return", "missing")) is not type(None)
    } == {}
