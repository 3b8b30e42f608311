"""``run.compile`` in real runs (issue 36): the tiny Zipformer trained through the engine on batches of
varying length, padded to time buckets (``data.pad_to_buckets``), compiles once per bucket and no more,
without graph breaks, logs its counts and time to the first step as "compile" events, and trains as the
eager run does.

The backend is ``aot_eager``: dynamo traces and AOTAutograd splits forward and backward as for inductor,
so graph breaks and recompilations count the same, but no kernels are generated (inductor took 384 s per
shape of this model's step on the 2-core dev box; ``tests/training/test_compile.py``).
"""

from __future__ import annotations

import pytest

from asr_pipeline.training.config import resolve_config

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")

# The corpus's examples have 60-120 frames: the batches' longest fall in both buckets.
BUCKETS = [96, 128]


def zipformer_run(corpus, tokenizer_path, run_dir, **run_options) -> dict:
    config = tiny_config(corpus, tokenizer_path, run_dir, dvclive=False, **run_options)
    config["model"] = {"architecture": "zipformer", "variant": "tiny"}
    config["data"] |= {"pad_to_buckets": BUCKETS, "val_manifests": []}
    return config


def test_a_switch_or_a_mode_name_configures_compiling(corpus, tokenizer_path, tmp_path):
    config = zipformer_run(corpus, tokenizer_path, tmp_path)
    assert resolve_config(config).run.compile == "off"
    assert resolve_config({**config, "run": {**config["run"], "compile": True}}).run.compile == "default"
    # YAML 1.1 reads a bare `off` as false
    assert resolve_config({**config, "run": {**config["run"], "compile": False}}).run.compile == "off"
    mode = {**config, "run": {**config["run"], "compile": "max-autotune"}}
    assert resolve_config(mode).run.compile == "max-autotune"


def test_pad_to_buckets_refuses_lengths_out_of_order(corpus, tokenizer_path, tmp_path):
    config = zipformer_run(corpus, tokenizer_path, tmp_path)
    config["data"]["pad_to_buckets"] = [128, 96]
    with pytest.raises(ValueError, match="strictly ascending"):
        resolve_config(config)


@pytest.mark.slow
def test_a_compiled_run_on_bucketed_batches_compiles_once_per_bucket_and_trains_as_eager(
    corpus, tokenizer_path, tmp_path
):
    compiled_dir, eager_dir = tmp_path / "compiled", tmp_path / "eager"
    options = {"compile": "default", "compile_backend": "aot_eager"}
    # An earlier compiled run in this process (as under pytest-xdist, or in a notebook): its frames must not
    # count as this run's recompilations (they did: 2 for 2 buckets, before runs reset dynamo).
    earlier = tmp_path / "earlier"
    run(zipformer_run(corpus, tokenizer_path, earlier, compile_cache=str(earlier / "cache"), **options))
    run(zipformer_run(corpus, tokenizer_path, compiled_dir, compile_cache=str(tmp_path / "cache"), **options))
    run(zipformer_run(corpus, tokenizer_path, eager_dir))
    # each repeated layer compiled on its own (regional), sharing the cache folder
    layers_dir = tmp_path / "layers"
    layer_options = {**options, "compile_scope": "layers"}
    run(
        zipformer_run(
            corpus, tokenizer_path, layers_dir, compile_cache=str(tmp_path / "cache"), **layer_options
        )
    )

    batching = events(compiled_dir, "data")[0]["values"]["batching"]
    assert batching["time_buckets"] == BUCKETS
    assert batching["epoch0"]["distinct_lengths"] == len(BUCKETS)  # both buckets are trained on
    first, *epochs = [e["values"] for e in events(compiled_dir, "compile")]
    assert first["phase"] == "first_step" and first["first_step_sec"] > 0
    assert [e["phase"] for e in epochs] == ["epoch", "epoch"]
    steady = epochs[-1]  # two epochs: every batch shape met at least twice
    assert steady["graph_breaks"] == 0
    assert steady["shapes"] == "buckets"
    assert 1 <= steady["compiles"] <= len(BUCKETS), steady
    assert steady["recompiles"] <= len(BUCKETS) - 1, steady
    assert epochs[0]["compiles"] == steady["compiles"]  # the second epoch compiled nothing new
    # The same initial weights, batches and random draws: the compiled graph computes the eager losses.
    compiled_losses = [e["values"]["loss"] for e in events(compiled_dir, "train")]
    eager_losses = [e["values"]["loss"] for e in events(eager_dir, "train")]
    assert len(compiled_losses) == len(eager_losses) >= 3
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-4)
    *_, layered_epoch1, layered_epoch2 = [e["values"] for e in events(layers_dir, "compile")]
    assert layered_epoch2["scope"] == "layers" and steady["scope"] == "model"
    assert layered_epoch2["graph_breaks"] == 0
    assert layered_epoch2["compiles"] == layered_epoch1["compiles"]  # the second epoch compiled nothing new
    layer_losses = [e["values"]["loss"] for e in events(layers_dir, "train")]
    assert layer_losses == pytest.approx(eager_losses, rel=1e-4)
    assert events(eager_dir, "compile") == []
