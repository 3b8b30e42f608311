"""A recipe run is one iteration of params.yaml ``<section>.<entries>``, named by ``<section>.current``."""

from __future__ import annotations

import pytest

from asr_pipeline.iterations import iteration_params


def test_the_current_iteration_and_its_entry_are_returned_an_empty_entry_as_a_mapping():
    params = {"current": "it2", "iterations": {"it1": {"a": 1}, "it2": None}}

    assert iteration_params(params, "hubert", "hubert_units") == ("it2", {})


def test_an_unset_current_says_how_to_run_one_iteration_and_lists_them():
    with pytest.raises(
        ValueError, match=r"finetune.current is not set: .*--pipelines=finetune .*\(runs: a, b\)"
    ):
        iteration_params({"runs": {"a": {}, "b": {}}}, "finetune", "finetune", entries="runs")


def test_an_unknown_current_names_the_entries_it_may_be():
    with pytest.raises(ValueError, match=r"pron.current='x' is not one of pron.aligners: mfcc"):
        iteration_params(
            {"current": "x", "aligners": {"mfcc": {}}}, "pron", "pron_aligner", entries="aligners"
        )
