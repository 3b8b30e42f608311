"""benchmarks/bench_optimizer_step.py: the optimizers side by side, with the aten ops each step dispatches."""

from __future__ import annotations

import pytest

from .conftest import imported_script


@pytest.fixture
def bench(monkeypatch):
    yield from imported_script(monkeypatch, "bench_optimizer_step")


def test_scaled_adam_dispatches_ops_per_tensor_where_the_fused_adamw_dispatches_a_handful(bench, capsys):
    ops = bench.main(["--variant", "tiny", "--rounds", "3", "--input-dim", "80"])

    table = capsys.readouterr().out
    assert all(
        f"{name}:" in table for name in ("adamw per-tensor", "adamw foreach", "adamw fused", "scaled_adam")
    )
    tensors = int(table.split(" tensors")[0].rsplit(" ", 1)[-1])
    assert ops["adamw fused"] < 20 < tensors
    assert ops["adamw per-tensor"] >= tensors and ops["scaled_adam"] >= 5 * tensors
