"""The choice between each op's kernel and its reference (``asr_kernels._dispatch``): the op names, ``auto``'s
per-op table and ``use_kernels(only=...)``."""

import re
from pathlib import Path

import pytest
import torch

import asr_kernels
from asr_kernels import (
    AUTO_KERNELS,
    OPS,
    _dispatch,
    auto_runs_kernel,
    kernel_ops,
    kernels_choice,
    use_kernels,
)
from asr_kernels._bench import OP_MODULES
from asr_kernels._measure import collect_bench_cases, load_op_modules
from asr_kernels.swoosh import swoosh_l, swoosh_r
from tests.kernels.support import DEVICE


def ran_kernel(out: torch.Tensor) -> bool:
    return "asr_kernels" in type(out.grad_fn).__name__  # the custom op's backward, else the reference's


def recorder(graphs: list[list[str]]):
    """A torch.compile backend that appends each graph's called functions to ``graphs`` and runs it as traced."""

    def backend(graph_module, example_inputs):
        graphs.append([str(node.target) for node in graph_module.graph.nodes if node.op == "call_function"])
        return graph_module

    return backend


def kernel_calls(graph: list[str]) -> list[str]:
    return [target for target in graph if "asr_kernels" in target]


def leaf(seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, 5, generator=generator).to(DEVICE).requires_grad_()


def test_the_op_names_are_the_ones_every_op_module_counts_and_benches():
    sources = [path.read_text() for path in Path(asr_kernels.__file__).parent.glob("*.py")]
    counted = {name for source in sources for name in re.findall(r'use_triton\(\s*"(\w+)"', source)}
    assert counted == set(OPS)
    modules, _ = load_op_modules(list(OP_MODULES))
    cases = collect_bench_cases(modules, 2, 8, 8, 2, torch.float32, DEVICE)
    assert {named.case.op for named in cases} == set(OPS)
    assert set(AUTO_KERNELS) <= set(OPS)


def test_auto_runs_a_kernel_only_where_the_table_says_it_pays():
    # RelativeShift beats the compiled reference too; inductor fuses SwooshL's reference with its neighbours, so
    # its kernel pays only in eager; the length masks never pay
    assert auto_runs_kernel("relative_shift", compiling=False) and auto_runs_kernel(
        "relative_shift", compiling=True
    )
    assert auto_runs_kernel("swoosh_l", compiling=False) and not auto_runs_kernel("swoosh_l", compiling=True)
    assert not auto_runs_kernel("sequence_mask", compiling=False)
    assert not auto_runs_kernel("glu", compiling=True)


def test_a_compiled_graph_follows_a_change_of_choice():
    # dynamo guards on the choice: narrowing it to other ops traces again rather than replaying a stale graph
    graphs: list[list[str]] = []
    compiled = torch.compile(lambda t: swoosh_l(t) + swoosh_r(t), backend=recorder(graphs), fullgraph=True)
    x = leaf()
    torch._dynamo.reset()
    for only in (["swoosh_l"], ["swoosh_r"], ["swoosh_l"]):
        with use_kernels("triton", only=only):
            compiled(x)
    assert len(graphs) == 2, "the third call replays the first graph"
    assert ["swoosh_l" in target for target in kernel_calls(graphs[0])] == [True]
    assert ["swoosh_r" in target for target in kernel_calls(graphs[1])] == [True]


@pytest.mark.skipif(not _dispatch.HAS_TRITON, reason="without Triton auto runs no kernel anywhere")
def test_kernel_ops_names_what_each_choice_runs_on_a_device():
    with use_kernels("auto"):
        assert (
            kernel_ops("cuda")
            == kernel_ops(torch.device("cuda", 1))
            == tuple(op for op in OPS if op in AUTO_KERNELS)
        )
        assert kernel_ops("cuda", compiling=True) == tuple(op for op in OPS if AUTO_KERNELS.get(op))
        assert kernel_ops("cpu") == kernel_ops("cpu", compiling=True) == ()
    with use_kernels("auto", only=["relative_shift", "glu"]):
        assert kernel_ops("cuda") == ("relative_shift",)
    with use_kernels("triton"):
        assert kernel_ops("cpu") == OPS
    with use_kernels("triton", only=["glu"]):
        assert kernel_ops("cuda", compiling=True) == ("glu",)
    with use_kernels("reference"):
        assert kernel_ops("cuda") == ()


def test_only_narrows_the_choice_to_the_ops_named_and_is_restored_after():
    x = leaf()
    with use_kernels("triton", only=["swoosh_l"]):
        assert ran_kernel(swoosh_l(x)) and not ran_kernel(swoosh_r(x))
        with use_kernels("triton"):  # a nested choice without only: every op again
            assert ran_kernel(swoosh_r(x))
        assert not ran_kernel(swoosh_r(x))
    assert kernels_choice() == "triton"  # tests/kernels/conftest.py's
    assert ran_kernel(swoosh_r(x))
    with use_kernels("reference", only=["swoosh_l"]):
        assert not ran_kernel(swoosh_l(x))


def test_only_takes_any_collection_of_op_names_but_not_a_string():
    with use_kernels("triton", only=(op for op in ["swoosh_l"])):  # a generator, read once
        assert kernel_ops("cpu") == ("swoosh_l",)
    with (
        pytest.raises(TypeError, match="a collection of op names, got the string 'glu'"),
        use_kernels("auto", only="glu"),
    ):
        pass


def test_an_unknown_op_is_refused_naming_the_ops():
    with (
        pytest.raises(ValueError, match=r"unknown kernel op\(s\) swish; the ops are glu, swoosh_l"),
        use_kernels("reference", only=["swoosh_l", "swish"]),
    ):
        pass
    assert kernels_choice() == "triton"  # untouched


@pytest.mark.kernels("auto")
def test_auto_takes_the_table_on_cuda_and_the_references_elsewhere():
    x = leaf()
    on_cuda = DEVICE == "cuda"
    assert ran_kernel(swoosh_l(x)) == (on_cuda and "swoosh_l" in AUTO_KERNELS)
    assert ran_kernel(swoosh_r(x)) == (on_cuda and "swoosh_r" in AUTO_KERNELS)


@pytest.mark.kernels("auto")
@pytest.mark.skipif(DEVICE != "cuda", reason="auto takes the references off CUDA, compiled or not")
def test_under_torch_compile_auto_takes_the_reference_of_an_op_that_pays_only_in_eager():
    assert "swoosh_l" in AUTO_KERNELS and not AUTO_KERNELS["swoosh_l"]
    graphs: list[list[str]] = []
    x = leaf()
    torch._dynamo.reset()
    torch.testing.assert_close(
        torch.compile(swoosh_l, backend=recorder(graphs), fullgraph=True)(x), swoosh_l(x)
    )
    assert graphs and graphs[0] and not kernel_calls(graphs[0]), graphs
    assert ran_kernel(swoosh_l(x)), "eager: the kernel"
