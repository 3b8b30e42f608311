"""training.alignment_iterations: the align and train_ce stages find their iteration's entry of params.yaml
``alignment.iterations`` through ``alignment.current``, and say how to set it when it is missing; an iteration
aligned linearly names the shipped aligner spec, a file dvc.yaml can depend on."""

from __future__ import annotations

import pytest

from asr_pipeline.training.alignment_iterations import LINEAR_ALIGNER, alignment_iteration, is_linear_aligner
from tests.conftest import PROJECT_ROOT


def test_the_current_iteration_and_its_entry():
    params = {"current": "it2", "iterations": {"it1": {"ce": 1}, "it2": {"ce": 2}}}
    assert alignment_iteration(params) == ("it2", {"ce": 2})
    assert alignment_iteration({"current": "it1", "iterations": {"it1": None}}) == ("it1", {})


def test_an_unset_iteration_names_the_align_pipeline_and_the_iterations():
    with pytest.raises(
        ValueError, match=r"alignment.current is not set: .*--pipelines=alignment_align .*\(iterations: it1\)"
    ):
        alignment_iteration({"iterations": {"it1": {}}})
    with pytest.raises(ValueError, match=r"alignment.current='it9' is not one of alignment.iterations: it1"):
        alignment_iteration({"current": "it9", "iterations": {"it1": {}}})


def test_the_shipped_linear_aligner_spec_is_recognised_and_a_run_dir_is_not(tmp_path):
    assert is_linear_aligner(PROJECT_ROOT / LINEAR_ALIGNER)
    assert not is_linear_aligner(tmp_path), "a run dir to align with"
    assert not is_linear_aligner(tmp_path / "missing")


def test_a_spec_file_that_is_not_the_linear_aligner_names_itself(tmp_path):
    spec = tmp_path / "aligner.yaml"
    spec.write_text("aligner: viterbi\n")
    with pytest.raises(ValueError, match=r"aligner\.yaml: an aligner spec says `aligner: linear`.*'viterbi'"):
        is_linear_aligner(spec)
