"""benchmarks/bench_optimizer_step.py: the optimizers side by side, with the aten ops each step dispatches."""

from __future__ import annotations

import pytest

from .conftest import imported_script


@pytest.fixture
def bench(monkeypatch):
    yield from imported_script(monkeypatch, "bench_optimizer_step")


def test_scaled_adam_dispatches_a_few_multi_tensor_ops_as_the_fused_adamw_does(bench, capsys):
    ops = bench.main(["--variant", "tiny", "--rounds", "3", "--input-dim", "80"])

    table = capsys.readouterr().out
    names = (
        "adamw per-tensor",
        "adamw foreach",
        "adamw fused",
        "scaled_adam",
        "scaled_adam segmented",
        "scaled_adam told",
    )
    assert all(f"{name}:" in table for name in names)
    tensors = int(table.split(" tensors")[0].rsplit(" ", 1)[-1])
    assert ops["adamw fused"] < 20 < tensors and ops["adamw per-tensor"] >= tensors
    # The CPU's ScaledAdam sums p * g tensor by tensor (its only per-tensor op); CUDA's in one reduction.
    # The loop over the tensors before session 29 dispatched ~20 a tensor.
    assert tensors <= ops["scaled_adam"] < tensors + 150  # ~60 a group at a size period's end
    assert ops["scaled_adam segmented"] < 150
    # Told the verdict: the gradients' flat copy, zeroed on a skip, the 0-d factors and the scalars'
    # clamp chosen on the device: a few more a param group, none a tensor.
    assert ops["scaled_adam segmented"] < ops["scaled_adam told"] < ops["scaled_adam segmented"] + 40
