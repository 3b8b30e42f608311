"""A HuBERT iteration needs both ``units`` and ``train`` mappings: DVC tracks each by name."""

from __future__ import annotations

import pytest

from asr_pipeline.hubert.iterations import hubert_iteration


def test_an_iteration_with_units_and_train_is_returned():
    params = {"current": "it1", "iterations": {"it1": {"units": {}, "train": {"optim": {"epochs": 1}}}}}

    assert hubert_iteration(params) == ("it1", {"units": {}, "train": {"optim": {"epochs": 1}}})


def test_an_iteration_missing_train_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"hubert.iterations.it1 needs train \(a mapping each"):
        hubert_iteration({"current": "it1", "iterations": {"it1": {"units": {}}}})
