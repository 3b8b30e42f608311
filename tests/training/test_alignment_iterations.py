"""training.alignment_iterations: the align and train_ce stages find their iteration's entry of params.yaml
``alignment.iterations`` through ``alignment.current``, and say how to set it when it is missing."""

from __future__ import annotations

import pytest

from asr_pipeline.training.alignment_iterations import alignment_iteration


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
