"""torch.compile for training (issue 36): the tiny Zipformer traces into one graph, bucketed batches of
varying lengths recompile at most once per bucket, and the compile cache of one run warms the next.

The graph-break and recompilation counts are dynamo's, so they are taken with the ``aot_eager`` backend
(forward and backward traced, no kernels generated): inductor took 384 s per shape of the tiny model's
training step on the 2-core dev box, aot_eager ~20-70 s. The cache test compiles a small MLP with inductor.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from asr_pipeline.data.batching import TimeBuckets
from asr_pipeline.models.zipformer import zipformer_demo, zipformer_tiny
from asr_pipeline.training.compile import (
    CompileCache,
    CompileCounts,
    compile_counts,
    compile_model,
    mark_batch_shapes,
    mark_input_shapes,
    repeated_layers,
)


def padded_batch(batch: int, frames: int, longest: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, frames, 80) features, zero past each length; lengths in [20, longest], the first = longest."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(20, longest + 1, (batch,), generator=generator)
    lengths[0] = longest
    features = torch.randn(batch, frames, 80, generator=generator)
    features *= (torch.arange(frames) < lengths[:, None]).unsqueeze(-1)  # (B, T, 1) mask
    return features, lengths


def test_mark_batch_shapes_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="buckets"):
        mark_batch_shapes(torch.zeros(2, 16, 4), torch.ones(2), "per-batch")  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_tiny_zipformer_compiles_into_one_graph_that_matches_eager_on_a_padded_batch():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = zipformer_tiny(vocab_size=11).eval()  # eval: no dropout or feature masks to draw
    features, lengths = padded_batch(3, 96, 90, seed=1)

    with torch.no_grad():
        eager, eager_lengths = model(features, lengths)
        # fullgraph: a graph break (an int(tensor) in forward) fails here instead of splitting the graph
        compiled, compiled_lengths = compile_model(model, fullgraph=True, backend="aot_eager")(
            features, lengths
        )

    assert torch.equal(compiled_lengths, eager_lengths)
    valid = torch.arange(eager.size(1)) < eager_lengths[:, None]  # (B, T'') real output frames
    torch.testing.assert_close(compiled[valid], eager[valid], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_bucketed_batches_of_varying_size_compile_once_per_bucket_without_graph_breaks():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = zipformer_tiny(vocab_size=11).train()
    compiled = compile_model(model, backend="aot_eager")
    buckets = TimeBuckets((48, 96))
    # (B, longest frames): batch sizes and lengths vary within each bucket, as a sampler's batches do
    shapes = [(3, 40), (2, 90), (4, 45), (2, 33), (5, 81), (3, 70)]
    before = compile_counts()

    for seed, (batch, longest) in enumerate(shapes):
        features, lengths = padded_batch(batch, buckets.padded_length(longest), longest, seed)
        mark_batch_shapes(features, lengths, "buckets")
        log_probs, _ = compiled(features, lengths)
        log_probs.sum().backward()

    counts = compile_counts() - before
    assert counts.graph_breaks == 0
    assert counts.compiles <= len(buckets.lengths), f"{counts.compiles} compiles for 2 bucket lengths"


CACHE_RUN = textwrap.dedent(
    """
    import json, sys, torch
    from asr_pipeline.training.compile import CompileCache, compile_counts, compile_model

    cache = CompileCache(sys.argv[1])
    with cache.active():
        loaded = cache.load()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
        compile_model(model)(torch.randn(5, 8)).sum().backward()
        saved = cache.save()
    counts = compile_counts()
    print(json.dumps({"loaded": loaded, "saved": saved, "hits": counts.cache_hits, "misses": counts.cache_misses}))
    """
)


def run_compiled(folder) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", CACHE_RUN, str(folder)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_run_compiles_from_the_artifacts_the_first_run_saved(tmp_path):
    first = run_compiled(tmp_path / "first")
    # Only the mega-cache file travels (a resume on another machine): the second run's inductor/ is empty.
    (tmp_path / "second").mkdir()
    shutil.copy(CompileCache(tmp_path / "first").artifacts_path, tmp_path / "second")
    second = run_compiled(tmp_path / "second")

    assert not first["loaded"] and first["saved"] > 0 and first["misses"] > 0
    assert second["loaded"] and second["misses"] == 0 and second["hits"] == first["misses"]


def test_the_repeated_layers_are_the_items_of_the_innermost_module_lists():
    model = zipformer_demo(vocab_size=11)

    sites = repeated_layers(model)

    # the encoder layers inside each stack's list, not the stacks (their list holds lists)
    assert [modules[index] for modules, index in sites] == [
        layer for stack in model.stacks for layer in stack.layers
    ]


def test_the_layers_scope_refuses_a_model_without_repeated_layers_and_an_unknown_scope():
    with pytest.raises(ValueError, match="compile scope 'model'"):
        compile_model(nn.Sequential(nn.Linear(4, 4)), backend="aot_eager", scope="layers")
    with pytest.raises(ValueError, match="model, layers"):
        compile_model(nn.Linear(4, 4), scope="blocks")  # type: ignore[arg-type]


def test_a_layers_inputs_are_marked_batch_dynamic_and_otherwise_static_in_buckets():
    x, lengths, positions = (
        torch.zeros(3, 20, 8),
        torch.ones(3),
        torch.zeros(39, 4),
    )  # (B, T', D), (B,), (2T'-1, P)

    mark_input_shapes((x, positions, lengths), "buckets")

    assert x._dynamo_weak_dynamic_indices == {0} and x._dynamo_static_indices == {1, 2}
    assert lengths._dynamo_weak_dynamic_indices == {0}
    assert positions._dynamo_static_indices == {0, 1}  # no batch axis
    untouched = torch.zeros(3, 20, 8)
    mark_input_shapes((untouched,), "auto")
    assert not hasattr(untouched, "_dynamo_static_indices")


@pytest.mark.slow
def test_layer_by_layer_compiling_trains_as_eager_shares_graphs_and_leaves_the_model_eager():
    torch._dynamo.reset()
    torch.manual_seed(0)
    # no dropout or feature masks: nothing random, so eager and compiled see the same numbers
    model = zipformer_demo(vocab_size=11, dropout=0.0, feature_mask_prob=0.0).train()
    layers = [layer for stack in model.stacks for layer in stack.layers]
    compiled = compile_model(model, backend="aot_eager", scope="layers", shapes="buckets")
    # a layer's graph depends on its widths and frame rate: 9 layers, 6 graphs
    distinct = {
        (tuple(p.shape for p in layer.parameters()), stack.factor)
        for stack in model.stacks
        for layer in stack.layers
    }
    before = compile_counts()

    results = []
    for module in (model, compiled):
        model.zero_grad()
        features, lengths = padded_batch(3, 96, 90, seed=1)
        log_probs, out_lengths = module(features, lengths)
        log_probs.sum().backward()
        results.append((log_probs.detach(), out_lengths, [p.grad.clone() for p in model.parameters()]))
    counts = compile_counts() - before
    (eager, eager_lengths, eager_grads), (ours, our_lengths, our_grads) = results

    assert torch.equal(our_lengths, eager_lengths)
    valid = torch.arange(eager.size(1)) < eager_lengths[:, None]  # (B, T'') real output frames
    torch.testing.assert_close(ours[valid], eager[valid], rtol=1e-5, atol=1e-5)
    for ours_grad, eager_grad in zip(our_grads, eager_grads, strict=True):
        torch.testing.assert_close(ours_grad, eager_grad, rtol=1e-4, atol=1e-5)
    # a graph per distinct layer, and per input kind: the first layer of a stack takes a view (dynamo
    # guards on its base), the next ones take a layer's output
    assert counts.graph_breaks == 0 and counts.compiles <= 2 * len(distinct), counts
    assert counts.compiles < len(layers)
    # the model's own lists hold its eager layers again (validation and checkpoints use them)
    assert [layer for stack in model.stacks for layer in stack.layers] == layers
    assert not any("_orig_mod" in name for name in model.state_dict())
    assert compiled.config is model.config  # the model's attributes, as through torch.compile's wrapper

    # other batch sizes in the same bucket compile nothing more; a second bucket length as much again
    def train_on(shapes: list[tuple[int, int]]) -> CompileCounts:
        for seed, (batch, frames) in enumerate(shapes):
            features, lengths = padded_batch(batch, frames, frames - 5, seed)
            mark_batch_shapes(features, lengths, "buckets")
            compiled(features, lengths)[0].sum().backward()
        return compile_counts() - before

    assert train_on([(2, 96), (5, 96)]).compiles == counts.compiles
    later = train_on([(4, 48), (3, 48), (2, 96)])
    assert later.graph_breaks == 0 and later.compiles == 2 * counts.compiles


def test_compile_options_go_to_inductor_on_top_of_the_modes_own(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "compile", lambda module, **kwargs: calls.append(kwargs) or module)
    model = torch.nn.Linear(4, 4)
    compile_model(model, mode="reduce-overhead", options={"combo_kernels": True})
    compile_model(model, mode="reduce-overhead")
    compile_model(model, backend="aot_eager", options={"combo_kernels": True})  # inductor's: not aot_eager's
    assert calls == [
        {
            "fullgraph": False,
            "backend": "inductor",
            "options": {"triton.cudagraphs": True, "combo_kernels": True},
        },
        {"fullgraph": False, "backend": "inductor", "mode": "reduce-overhead"},
        {"fullgraph": False, "backend": "aot_eager"},
    ]
