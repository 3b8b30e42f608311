"""Issue 36: what a ``torch.compile``d training step leaves a GPU to do -- its kernel calls and their bytes --
counted without one.

Inductor's own pipeline, on fake tensors, as far as its scheduler: the model's forward and backward traced by
AOTAutograd with inductor's decompositions (fake CPU tensors under the CPU's autocast, given CUDA's float32
ops by ``CudaFloat32Ops`` and CUDA's attention kernel by ``FusedAttention("cuda")``: autograd's engine runs no
backward on fake CUDA tensors), the joint graph moved to CUDA, then inductor's joint-graph passes, its min-cut
partition (what the compiled forward saves for the backward), its post-grad passes, lowering and the
scheduler's fusion for an sm90 device (H100/H200: 132 SMs, no GPU touched); everything but generating the
kernels' code and running it. Per arm (PRECISION, every kernel the reference: ``torch.compile`` of the issue's
table): the kernel calls one step makes (generated Triton kernels, a combo kernel's partitions as its code
generation groups them, and extern calls: matrix products, convolutions and their backward, attention,
fallbacks; one extern call may be several CUDA kernels inside cuBLAS or cuDNN), those moving under 1 MiB
(their time is the launch's), the GB they read and write (inductor's own count, each buffer a kernel touches,
once), the GB the forward saves for the backward, beside the eager step's ops and GB read and written
(``bench_forward_bytes``' census of the same step). The step is the model's forward and backward as the
engine compiles it (``--compile-scope model``): the CTC loss and the optimizer are outside the graph and not
counted. Not run: inductor's pre-grad passes, and its re-propagation of strides before the post-grad passes.

Bytes over the measured memory rate of a chip are a floor under the compiled step's time (``bench_gpu_step``
measures the rate beside the step): what the GPU's profile must explain is the rest. ``--by-module`` breaks an
arm's kernels down by the module whose ops they fuse (most of their ops), pass and kind; ``--compile-options``
lowers under inductor settings (the engine's flag: ``combo_kernels=True``).

    python benchmarks/bench_compiled_bytes.py                           # Zipformer-M, 128 x <=10 s, f32 and bf16
    python benchmarks/bench_compiled_bytes.py --models zipformer:demo --arms bf16 --by-module bf16
    python benchmarks/bench_compiled_bytes.py --models w2v-bert:600m --arms bf16 --model-option relative_key_attention=flex
"""

from __future__ import annotations

import argparse
import contextlib
import types
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from unittest import mock

import torch
import torch.fx.traceback as fx_traceback
import torch.nn.attention.flex_attention as flex_attention
from bench_forward_bytes import (
    PRECISIONS,
    CudaFloat32Ops,
    FusedAttention,
    fake_batch,
    fake_model,
    innermost,
    module_stack,
    step_census_on_cpu,
)
from torch._subclasses.fake_tensor import FakeTensorMode

# The batch and the table the training-step benchmarks share.
from training_step import add_model_option_flag, compile_options, print_table

from asr_kernels import use_kernels
from asr_pipeline.models import w2v_bert_blocks

GB = 1e9
# The kinds of kernel that do matrix work: cuBLAS / cuDNN calls and inductor's matmul templates (max-autotune).
MATMUL_KINDS = ("mm", "bmm", "addmm", "convolution", "convolution_backward", "template")
SMALL = 2**20  # bytes: a kernel moving less takes under a microsecond at HBM rates, less than its launch
# What inductor asks of the device it compiles for: an H100 / H200 (sm90, 132 SMs); the kernels' code is not
# generated, so nothing else of the chip matters here.
SM90 = types.SimpleNamespace(
    name="sm90 (H100/H200, fake)",
    major=9,
    minor=0,
    multi_processor_count=132,
    total_memory=80 * 2**30,
    regs_per_multiprocessor=65536,
    max_threads_per_multi_processor=2048,
    max_threads_per_block=1024,
    warp_size=32,
    L2_cache_size=50 * 2**20,
    shared_memory_per_block_optin=227 * 1024,
    shared_memory_per_multiprocessor=228 * 1024,
)


class Stop(Exception):
    """Raised by the capturing partitioner: the joint graph is all that is wanted of AOTAutograd."""


@dataclass
class Kernels:
    """One compiled graph's kernels: per (module, kind), how many and the bytes they read and write."""

    count: Counter = field(default_factory=Counter)
    moved: Counter = field(default_factory=Counter)
    small: int = 0  # kernel calls moving under SMALL bytes: their time is the launch's, whatever the chip
    saved_bytes: int = 0  # a forward's: what it hands the backward (activations; parameters left out)

    def add(self, module: str, kind: str, moved: int) -> None:
        self.count[(module, kind)] += 1
        self.moved[(module, kind)] += moved
        self.small += moved < SMALL

    def kernels(self, kinds: tuple[str, ...] | None = None) -> int:
        return sum(n for (_, kind), n in self.count.items() if kinds is None or kind in kinds)

    def gb(self) -> float:
        return sum(self.moved.values()) / GB


@contextlib.contextmanager
def sm90() -> Iterator[None]:
    """Inductor lowers and fuses for a CUDA device that is not there: the device's properties (``SM90``) and
    Triton's presence answered for it; joint-graph constant folding (it runs ops on the device) off."""
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor import config
    from torch._inductor import scheduler as inductor_scheduler
    from torch._inductor.runtime.hints import DeviceProperties
    from torch._inductor.utils import is_big_gpu

    interface = get_interface_for_device("cuda")
    properties = staticmethod(lambda device=None: SM90)
    patches = [
        mock.patch.object(interface, "get_device_properties", properties),
        mock.patch.object(interface, "get_compute_capability", staticmethod(lambda device=None: 90)),
        mock.patch.object(interface.Worker, "get_device_properties", properties),
        mock.patch.object(torch.cuda, "get_device_properties", lambda device=None: SM90),
        mock.patch.object(torch.cuda, "get_device_capability", lambda device=None: (9, 0)),
        mock.patch.object(torch.cuda, "current_device", lambda: 0),
        mock.patch.object(inductor_scheduler, "has_triton", lambda: True),
        # A Triton template's code (FlexAttention's) is keyed by the Triton backend: not asked of a driver.
        mock.patch.object(torch.utils._triton, "triton_hash_with_backend", lambda: "sm90 (fake)"),
        config.patch(joint_graph_constant_folding=False),
    ]
    caches = (DeviceProperties.create, is_big_gpu)  # what inductor caches of a device: not the fake's, after
    with contextlib.ExitStack() as stack:
        for cache in caches:
            cache.cache_clear()
            stack.callback(cache.cache_clear)
        for patch in patches:
            stack.enter_context(patch)
        yield


@contextlib.contextmanager
def module_annotations() -> Iterator[None]:
    """Every graph node traced under it carries the innermost module running it (``meta["custom"]["module"]``,
    class name); AOTAutograd copies it to the backward's nodes of the same autograd node."""
    modules: list[str] = []
    where = innermost(modules)

    def annotate(*_) -> None:
        fx_traceback.current_meta["custom"] = {"module": where()}

    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    with fx_traceback.preserve_node_meta(), module_stack(modules):
        # Registered after module_stack's hooks, so each runs once the stack has changed.
        handles = [register_module_forward_pre_hook(annotate), register_module_forward_hook(annotate)]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
            fx_traceback.current_meta.pop("custom", None)


def joint_graph(model: torch.nn.Module, batch: dict, precision: str):
    """The joint forward-backward graph of ``model`` (fake CPU parameters) on ``batch`` with the references,
    traced as ``torch.compile`` traces it: (graph, primals, tangents, the partitioner's keyword arguments)."""
    from torch._functorch.aot_autograd import aot_function
    from torch._inductor.decomposition import select_decomp_table

    names = [name for name, _ in model.named_parameters()]
    buffer_names = [name for name, _ in model.named_buffers()]
    dtype = PRECISIONS[precision]

    def step(parameters, buffers, features, lengths):
        state = dict(zip(names, parameters, strict=True)) | dict(zip(buffer_names, buffers, strict=True))
        with (
            torch.autocast("cpu", dtype=dtype, enabled=dtype is not None),
            module_annotations(),
            CudaFloat32Ops(),  # CUDA's autocast dtypes (LayerNorm, softmax, ... in float32), not the CPU's
            FusedAttention("cuda"),  # SDPA as CUDA's kernel, not the CPU's math path
        ):
            return torch.func.functional_call(model, state, (features, lengths))

    captured = {}

    def capture(graph, joint_inputs, **kwargs):
        captured.update(graph=graph, inputs=joint_inputs, kwargs=kwargs)
        raise Stop

    traced = aot_function(
        step, fw_compiler=lambda graph, _: graph, partition_fn=capture, decompositions=select_decomp_table()
    )
    model.train()
    prime_dynamo()
    # A compiled forward skips what eager checks by reading the device (zipformer's shortest length), and
    # takes FlexAttention where CUDA has it (W2V-BERT's relative_key_attention 'flex'; torch's CPU kernel has no
    # backward, so its device check is lifted: the fake trace runs nothing).
    with (
        use_kernels("reference"),
        mock.patch.object(torch.compiler, "is_compiling", lambda: True),
        mock.patch.object(w2v_bert_blocks, "flex_runs_here", lambda q: True),
        mock.patch.object(flex_attention, "_validate_device", lambda *tensors: None),
        contextlib.suppress(Stop),
    ):
        traced(list(model.parameters()), list(model.buffers()), batch["features"], batch["lengths"])
    primals, tangents = captured["inputs"]
    return captured["graph"], primals, tangents, captured["kwargs"]


def prime_dynamo() -> None:
    """Dynamo's tables of torch's functions, built once a process and kept, built before ``joint_graph``
    patches ``torch.compiler.is_compiling``: FlexAttention's reference traces with dynamo, and tables built
    under the patch would hold the patch, so every later trace in the process would break at
    ``is_compiling`` (a graph break, or fullgraph's error)."""

    def uses_is_compiling(x: torch.Tensor) -> torch.Tensor:
        return x + 1 if torch.compiler.is_compiling() else x

    torch.compile(uses_is_compiling, backend="eager", fullgraph=True)(torch.zeros(1))


def to_cuda(graph: torch.fx.GraphModule, inputs: list, fake: FakeTensorMode) -> list:
    """Moves a CPU-traced ``graph`` to CUDA: its device arguments and every node's fake value; returns
    ``inputs`` as fake CUDA tensors of the same shapes, strides and dtypes."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    def swap(value):
        if isinstance(value, torch.device) and value.type == "cpu":
            return torch.device("cuda", 0)
        if isinstance(value, list | tuple):
            return type(value)(swap(item) for item in value)
        return value

    for node in graph.graph.nodes:
        node.args = swap(node.args)
        node.kwargs = {key: swap(value) for key, value in node.kwargs.items()}
    graph.recompile()
    with fake:
        moved = [
            torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="cuda")
            if isinstance(x, torch.Tensor)
            else x
            for x in inputs
        ]
    FakeTensorProp(graph, mode=fake).propagate_dont_convert_inputs(*moved)
    return moved


def kernel_of(node) -> tuple[str, str]:
    """A scheduler node's (module, kind). Kind: the extern kernel's op, or ``reduction`` / ``pointwise`` for a
    generated (Triton) kernel. Module: for an extern kernel its own op's (its origins also hold the ops that laid
    out its inputs), for a generated one the module most of its ops came from."""

    def op_name(target) -> str:  # "extern_kernels.mm", aten.convolution_backward.default -> "mm", ...
        text = str(target).removeprefix("torch.ops.")
        return text.removeprefix("aten.").removeprefix("extern_kernels.").removesuffix(".default")

    origins = [origin for part in node.get_nodes() if part.node is not None for origin in part.node.origins]
    if node.is_extern():
        extern = node.node
        kind = op_name(
            getattr(extern, "python_kernel_name", None) or getattr(extern, "op_overload", "extern")
        )
        origins = [origin for origin in origins if op_name(origin.target) == kind] or origins
    elif node.is_template():  # a Triton matmul template (max-autotune), epilogue included
        kind = "template"
    else:
        kind = "reduction" if node.is_reduction() else "pointwise"
    modules = Counter(origin.meta.get("custom", {}).get("module", "-") for origin in origins)
    return (modules.most_common(1)[0][0] if modules else "-"), kind


def lower(graph: torch.fx.GraphModule, fake: FakeTensorMode, backward: bool) -> Kernels:
    """Inductor's post-grad passes, lowering and scheduling of one partitioned graph: its kernels."""
    from torch._inductor.compile_fx import _recursive_post_grad_passes
    from torch._inductor.debug import DebugContext
    from torch._inductor.graph import GraphLowering
    from torch._inductor.ir import MultiOutput
    from torch._inductor.scheduler import ForeachKernelSchedulerNode, NopKernelSchedulerNode
    from torch._inductor.virtualized import V

    with V.set_fake_mode(fake):
        _recursive_post_grad_passes(graph, is_inference=False)
    inputs = [node.meta["val"] for node in graph.graph.nodes if node.op == "placeholder"]
    lowering = GraphLowering(graph, example_inputs=inputs, is_inference=False, is_backward=backward)
    kernels = Kernels()
    with DebugContext(), V.set_fake_mode(fake), V.set_graph_handler(lowering):
        lowering.run(*inputs)
        lowering._update_scheduler()
        for node in lowering.scheduler.nodes:
            if node.get_device() is not None and node.get_device().type != "cuda":
                raise RuntimeError(
                    f"inductor scheduled {node.get_name()} on {node.get_device()}, not the GPU"
                )
            if isinstance(node, ForeachKernelSchedulerNode):  # combo kernels: one launch per partition
                for part in combo_partitions(node, lowering.scheduler):
                    kinds = [kernel_of(sub) for sub in part]  # a partition of several: the most common module
                    module, kind = (
                        kinds[0]
                        if len(part) == 1
                        else (Counter(m for m, _ in kinds).most_common(1)[0][0], "combo")
                    )
                    kernels.add(module, kind, sum(sub.get_read_write_buffers_sizes() for sub in part))
            # views and the parts of a multi-output extern kernel (``buf[0]``) launch nothing
            elif not isinstance(node, NopKernelSchedulerNode) and not isinstance(node.node, MultiOutput):
                kernels.add(*kernel_of(node), node.get_read_write_buffers_sizes())
    return kernels


def combo_partitions(node, scheduler) -> list[list]:
    """The kernels a combo node launches: its sub-kernels grouped as inductor's code generation groups them
    (``SIMDScheduling.generate_combo_kernel_code``: by tiling, argument count, 2-D reductions apart)."""
    from torch._inductor.codegen.simd import NodeInfo
    from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures
    from torch._inductor.codegen.triton_combo_kernel import ComboKernel
    from torch._inductor.virtualized import V

    backend = scheduler.get_backend(node.get_device())
    backend = getattr(backend, "_triton_scheduling", backend)
    subkernels, infos = node.get_subkernel_nodes(), {}
    for sub in subkernels:
        nodes = sub.get_nodes()
        _, (numel, rnumel) = max(nodes, key=lambda part: int(part.is_reduction())).group
        schedule = backend.generate_node_schedule(nodes, numel, rnumel)
        features = SIMDKernelFeatures(schedule, numel, rnumel)
        infos[sub] = NodeInfo(
            node_schedule=schedule,
            tiling=backend.select_tiling(schedule, numel, rnumel),
            numel=numel,
            rnumel=rnumel,
            features=features,
            is_persistent_reduction=features.is_reduction()
            and V.choices.should_use_persistent_reduction(features, cooperative_reduction=False),
        )
    partitions = ComboKernel.horizontal_partition(
        nodes=subkernels,
        triton_scheduling=backend,
        custom_algorithm=node.use_custom_partition_algo,
        node_info_map=infos,
    )
    return [part for part in partitions if part]


def compiled_step(
    model: torch.nn.Module, batch: dict, precision: str, traced_in: FakeTensorMode
) -> tuple[Kernels, Kernels]:
    """The kernels of the compiled forward and backward of one training step (parameters and batch: fake CPU
    tensors of ``traced_in``)."""
    from torch._inductor.compile_fx import partition_fn
    from torch._inductor.virtualized import V

    with traced_in:
        graph, primals, tangents, kwargs = joint_graph(model, batch, precision)
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with sm90():
        moved = to_cuda(graph, [*primals, *tangents], fake)
        with V.set_fake_mode(fake):
            forward_graph, backward_graph = partition_fn(
                graph, (moved[: len(primals)], moved[len(primals) :]), **kwargs
            )
        forward = lower(forward_graph, fake, backward=False)
        backward = lower(backward_graph, fake, backward=True)
    forward.saved_bytes = sum(
        node.meta["val"].untyped_storage().nbytes()
        for node in backward_graph.graph.nodes
        if node.op == "placeholder"
        and isinstance(node.meta.get("val"), torch.Tensor)
        and not node.name.startswith(("primals", "tangents"))
    )
    return forward, backward


def breakdown_lines(forward: Kernels, backward: Kernels, rows: int) -> list[str]:
    """The largest movers, by pass, module and kind."""
    entries = [
        (moved, name, key, kernels.count[key])
        for name, kernels in (("fwd", forward), ("bwd", backward))
        for key, moved in kernels.moved.items()
    ]
    entries.sort(key=lambda entry: -entry[0])
    return [
        f"{name:<4} {module:<30} {kind:<24} {count:>7} {moved / GB:>8.2f}"
        for moved, name, (module, kind), count in entries[:rows]
    ]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["zipformer:m"], help="ARCHITECTURE:VARIANT")
    parser.add_argument(
        "--arms", nargs="+", choices=list(PRECISIONS), default=["f32", "bf16"], help="precisions"
    )
    parser.add_argument("--batch-frames", type=int, default=128_000, help="padded 10 ms frames per batch")
    parser.add_argument("--max-frames", type=int, default=1000, help="the longest utterance's frames")
    parser.add_argument("--by-module", choices=list(PRECISIONS), help="break this arm's kernels down")
    parser.add_argument("--rows", type=int, default=15, help="rows of the breakdown")
    parser.add_argument(
        "--compile-options",
        type=compile_options,
        default={},
        metavar="KEY=VALUE,...",
        help="inductor config settings to lower with, as the engine's --compile-options (combo_kernels=True)",
    )
    add_model_option_flag(parser)
    args = parser.parse_args(argv)
    options = dict(args.model_option)
    from torch._inductor import config

    results = []
    for model_name in args.models:
        fake = FakeTensorMode(allow_non_fake_inputs=True)
        try:
            model = fake_model(model_name, fake, "cpu", **options)
            batch = fake_batch(model_name, args, fake, "cpu")
        except ValueError as error:  # an unknown architecture or size: the registry names the choices
            parser.error(f"--models {model_name}: {error}")
        shape = "x".join(str(n) for n in batch["features"].shape[:2])
        for precision in args.arms:
            with fake:
                eager_forward, eager_backward = step_census_on_cpu(model, batch, precision)
            with config.patch(args.compile_options):
                forward, backward = compiled_step(model, batch, precision, fake)
            eager_gb = sum(
                totals["written_gb"] + totals["read_gb"]
                for totals in (eager_forward.totals(), eager_backward.totals())
            )
            results.append(
                {
                    "model": model_name,
                    "arm": precision,
                    "batch": shape,
                    "compile_options": args.compile_options,
                    "model_options": options,
                    "forward_kernels": forward.kernels(),
                    "backward_kernels": backward.kernels(),
                    "matmul_kernels": forward.kernels(MATMUL_KINDS) + backward.kernels(MATMUL_KINDS),
                    "small_kernels": forward.small + backward.small,
                    "forward_gb": forward.gb(),
                    "backward_gb": backward.gb(),
                    "saved_gb": forward.saved_bytes / GB,
                    "eager_gb": eager_gb,
                    "eager_ops": sum(eager_forward.ops.values()) + sum(eager_backward.ops.values()),
                }
            )
            if precision == args.by_module:
                columns = f"{'module':<30} {'kind':<24} {'kernels':>7} {'GB':>8}"
                print_table(
                    f"{model_name} {precision} compiled, batch {shape}: pass {columns}",
                    breakdown_lines(forward, backward, args.rows),
                )
                print()
    print_rows(results)
    return results


def print_rows(results: list[dict]) -> None:
    print_table(
        f"{'model':<16} {'arm':<5} {'batch':<9} {'fwd k':>6} {'bwd k':>6} {'matmul':>6} {'<1 MiB':>6} {'fwd GB':>8} "
        f"{'bwd GB':>8} {'step GB':>8} {'saved GB':>9} {'eager ops':>9} {'eager GB':>9} {'compiled/eager':>14}",
        [
            f"{r['model']:<16} {r['arm']:<5} {r['batch']:<9} {r['forward_kernels']:>6} {r['backward_kernels']:>6} "
            f"{r['matmul_kernels']:>6} {r['small_kernels']:>6} {r['forward_gb']:>8.2f} {r['backward_gb']:>8.2f} "
            f"{r['forward_gb'] + r['backward_gb']:>8.2f} {r['saved_gb']:>9.2f} {r['eager_ops']:>9} "
            f"{r['eager_gb']:>9.2f} {(r['forward_gb'] + r['backward_gb']) / r['eager_gb']:>13.2f}x"
            for r in results
        ],
    )


if __name__ == "__main__":
    main()
