"""training.trainer: what a Trainer does to the model it builds before the first step (``model.init``)."""

from __future__ import annotations

import pytest

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


def test_model_init_initialises_a_new_run_once_and_a_resumed_run_not_again(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 1
    config["model"]["init"] = {"linear": "xavier_uniform", "norm": "ones"}
    run(config)
    resumed = {
        **config,
        "optim": {**config["optim"], "epochs": 2},
        "run": {**config["run"], "resume_from": str(tmp_path)},
    }

    run(resumed)

    [init] = events(tmp_path, "init")  # written by the first run only: the resumed one loaded trained weights
    assert (init["step"], init["values"]["schemes"]) == (0, {"linear": "xavier_uniform", "norm": "ones"})
    assert init["values"]["modules"]["linear"] > 0 and init["values"]["modules"]["norm"] > 0
    assert [e["epoch"] for e in events(tmp_path, "epoch")] == [0, 1], "the second epoch ran on resume"
