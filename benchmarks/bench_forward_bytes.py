"""Issue 36: where an eager training forward moves its bytes on a GPU, counted without one.

The model runs forward on fake CUDA tensors (``torch._subclasses.FakeTensorMode``: shapes, dtypes and
devices, no data, no GPU) under CUDA's own autocast policy (the op lists ``torch.autocast("cuda")`` applies,
not the CPU's), in training mode, with the asr_kernels choice of the arm. Every ATen op that eager dispatches
is one kernel launch and one pass over memory, so the census says what an eager step on the chip reads and
writes and where: per arm, the ops (views left out), the dtype casts autocast and the model add, the GB
written (and how much of it float32), the GB read, and the GB autograd saves for the backward (activation
memory; parameters left out). ``--by-module ARM`` breaks one arm down by the innermost module that ran
each op (class name), op and output dtype, the largest writers first, and what autograd saves by module and
dtype.

An arm is PRECISION:KERNELS (f32|bf16 : off|auto|on|OP): kernels as in ``bench_gpu_step.py`` (off = every
reference, auto = ``AUTO_KERNELS``'s eager column, on = every kernel, OP = that op's kernel alone; a kernel
counts as one op, its own reads and writes). What ``torch.compile`` fuses away is not counted: this is the
eager step's memory traffic, the thing fusion and narrower dtypes shrink.

``--backward`` also counts the backward of the kernels-off arms, each op charged to the module whose forward
made its autograd node. Autograd's engine runs no backward on fake CUDA tensors, so that step runs on fake
CPU tensors under the CPU's autocast, given CUDA's float32 ops (``CudaFloat32Ops``: LayerNorm, softmax, pow,
... of a bf16 input in float32) and CUDA's attention kernel: the ``CPU fwd`` column (that step's forward)
beside ``GB out`` says how far it still parts from CUDA's (dropout, which the CPU decomposes into four ops;
BatchNorm's saved statistics).

``F.scaled_dot_product_attention`` counts as the fused kernel a GPU runs (``FusedAttention``).
Data-dependent reads (``int(lengths.min())``) are answered from the batch's real lengths: integer tensors
derived from them are evaluated on the CPU beside their fakes.

    python benchmarks/bench_forward_bytes.py                                  # Zipformer-M, 128 x <=10 s
    python benchmarks/bench_forward_bytes.py --models squeezeformer:m --by-module bf16:off
    python benchmarks/bench_forward_bytes.py --backward --arms f32:off bf16:off    # and the backward
"""

from __future__ import annotations

import argparse
import contextlib
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

# The batch and the table the training-step benchmarks share.
from training_step import KERNEL_ARMS, VOCAB_SIZE, kernel_choice, parse_model, print_table, synthetic_batch

from asr_kernels import use_kernels
from asr_pipeline.models.registry import build_model, default_input_dim

PRECISIONS = {"f32": None, "bf16": torch.bfloat16}
GB = 1e9
# Ops that are no view by their schema yet return their input's storage (reshape after a matmul): no traffic.
SHARES_STORAGE = (torch.ops.aten._unsafe_view.default,)


def parse_arm(text: str) -> tuple[str, str]:
    precision, _, kernels = text.partition(":")
    if precision not in PRECISIONS or kernels not in KERNEL_ARMS:
        raise argparse.ArgumentTypeError(
            f"an arm is PRECISION:KERNELS with PRECISION one of {', '.join(PRECISIONS)} and KERNELS one of "
            f"{', '.join(KERNEL_ARMS)}; got {text!r}"
        )
    return precision, kernels


def tensors_in(value) -> list[torch.Tensor]:
    """Every tensor in a (nested) value: an op's arguments or outputs."""
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def tensor_bytes(value) -> int:
    """Bytes of every tensor in a (nested) value, as each is seen (a view counts its own elements)."""
    return sum(t.numel() * t.element_size() for t in tensors_in(value))


@dataclass
class Census:
    """Counts per (module, op, output dtype): ops, bytes written and read; the casts; bytes saved for backward."""

    ops: Counter = field(default_factory=Counter)
    written: Counter = field(default_factory=Counter)
    read: Counter = field(default_factory=Counter)
    casts: int = 0
    cast_bytes: int = 0
    saved: Counter = field(default_factory=Counter)  # (module, dtype) -> bytes saved for backward

    def record(self, module: str, name: str, inputs: tuple, out) -> None:
        """One op's call: ``inputs`` its (args, kwargs), ``out`` what it returned."""
        args = inputs[0]
        outputs = tensors_in(out)
        dtypes = ",".join(sorted({str(t.dtype).removeprefix("torch.") for t in outputs}))
        key = (module, name, dtypes)
        self.ops[key] += 1
        self.written[key] += tensor_bytes(outputs)
        self.read[key] += tensor_bytes(inputs)
        if (
            name == "_to_copy"
            and outputs
            and isinstance(args[0], torch.Tensor)
            and args[0].dtype != outputs[0].dtype
        ):
            self.casts += 1
            self.cast_bytes += tensor_bytes(outputs)

    def totals(self) -> dict:
        float32 = sum(v for (_, _, dtypes), v in self.written.items() if "float32" in dtypes.split(","))
        return {
            "ops": sum(self.ops.values()),
            "casts": self.casts,
            "cast_gb": self.cast_bytes / GB,
            "written_gb": sum(self.written.values()) / GB,
            "written_f32_gb": float32 / GB,
            "read_gb": sum(self.read.values()) / GB,
            "saved_gb": sum(self.saved.values()) / GB,
        }


class CensusMode(TorchDispatchMode):
    """Records every non-view ATen op under it into ``census``, charged to ``where()`` (the module running it);
    keeps a CPU copy (``shadow``) beside each integer tensor an ATen op computes only from shadowed tensors, so a
    ``.item()`` of one gets its real value."""

    def __init__(self, census: Census, where: Callable[[], str]) -> None:
        super().__init__()
        self.census, self.where = census, where

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and hasattr(args[0], "shadow"):
            with _disable_current_modes():  # the fake mode below would fake the real copy
                return args[0].shadow.item()
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor) and not out.is_floating_point() and func.namespace == "aten":
            shadow_of(func, args, kwargs, out)
        if not func.is_view and func not in SHARES_STORAGE and tensors_in(out):
            self.census.record(self.where(), func.overloadpacket.__name__, (args, kwargs), out)
        return out


def innermost(modules: list[str]) -> Callable[[], str]:
    """The forward's ``where``: the innermost module running now."""
    return lambda: modules[-1] if modules else "-"


def backward_node_module() -> str:
    """The backward's ``where``: the module whose forward made the autograd node running now (``TagNodes``)."""
    node = torch._C._current_autograd_node()
    return node.metadata.get("module", "-") if node is not None else "-"


class TagNodes(TorchFunctionMode):
    """Tags each autograd node a torch function call makes (autocast's casts inside it too) with the module
    running it, ``metadata["module"]``: the backward's ops are charged to the module whose forward made them.
    Two limits: a custom ``autograd.Function``'s node (``apply`` is no torch function) goes to the module that
    next uses its output, and where a tensor feeds several branches, autograd's sum of their gradients goes to
    the branch whose gradient arrives last (Zipformer-M's "Linear add float32": the residual stream's)."""

    def __init__(self, where: Callable[[], str]) -> None:
        super().__init__()
        self.where = where

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        module = self.where()
        pending = [t.grad_fn for t in tensors_in(out)]
        while pending:
            node = pending.pop()
            if node is not None and "module" not in node.metadata:
                node.metadata["module"] = module
                pending.extend(next_node for next_node, _ in node.next_functions)
        return out


# The ops CUDA's autocast runs in float32 and the CPU's does not (torch 2.11's lists, "Autocast Op Reference"):
# ``CudaFloat32Ops`` gives a CPU trace CUDA's dtypes for them.
CUDA_FLOAT32_OPS = [
    "acos",
    "asin",
    "cosh",
    "erfinv",
    "exp",
    "expm1",
    "log",
    "log10",
    "log1p",
    "log2",
    "pow",
    "reciprocal",
    "rsqrt",
    "sinh",
    "tan",
    "softplus",
    "layer_norm",
    "group_norm",
    "norm",
    "normalize",
    "cosine_similarity",
    "dist",
    "pdist",
    "cumprod",
    "cumsum",
    "prod",
    "sum",
    "renorm",
    "softmax",
    "softmin",
    "log_softmax",
    "__pow__",
    "__rpow__",
    "__rtruediv__",
    "__rdiv__",
]


def cuda_float32_functions() -> frozenset:
    """Every spelling of ``CUDA_FLOAT32_OPS``: torch's function, the tensor method, torch.nn.functional's."""
    return frozenset(
        getattr(owner, name)
        for name in CUDA_FLOAT32_OPS
        for owner in (torch, torch.Tensor, F)
        if callable(getattr(owner, name, None))
    )


def to_float32(value):
    """A floating tensor in float32; anything else as it is."""
    return value.float() if isinstance(value, torch.Tensor) and value.is_floating_point() else value


class CudaFloat32Ops(TorchFunctionMode):
    """Under the CPU's autocast, the ops CUDA's autocast runs in float32 run in float32, as CUDA runs them: their
    floating inputs cast up, autocast off inside. A step traced on the CPU then has CUDA's dtypes (LayerNorm,
    softmax, pow, ... of a bf16 input give float32, as on the GPU; the CPU's own policy keeps bf16)."""

    functions = cuda_float32_functions()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in self.functions or not torch.is_autocast_enabled("cpu"):
            return func(*args, **kwargs)
        args, kwargs = pytree.tree_map(to_float32, (args, kwargs))
        with torch.autocast("cpu", enabled=False):
            return func(*args, **kwargs)


class FusedAttention(TorchFunctionMode):
    """``F.scaled_dot_product_attention`` as the one fused kernel a device runs (CUDA: memory-efficient attention,
    any mask and dropout, flash attention moving the same bytes; the CPU: its flash attention), not the math
    decomposition fake tensors would otherwise take (no device to choose a backend on); autocast's cast applied
    as SDPA's. Fake tensors only. On the CPU a mask that needs its gradient (a learned position bias) keeps the
    math path, which counts more than CUDA's kernel writes. ``device="cuda"``: CUDA's kernel whatever the
    tensors' device, for a trace that moves to CUDA afterwards (``bench_compiled_bytes``; no real tensors)."""

    def __init__(self, device: str | None = None) -> None:
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not F.scaled_dot_product_attention:
            return func(*args, **kwargs)
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")
        given = {**dict(zip(names, args, strict=False)), **kwargs}
        q, k, v, mask = given["query"], given["key"], given["value"], given.get("attn_mask")
        dropout, causal, scale = (
            given.get("dropout_p", 0.0),
            given.get("is_causal", False),
            given.get("scale"),
        )
        if mask is not None and causal:
            raise ValueError("scaled_dot_product_attention takes an attn_mask or is_causal=True, not both")
        device = self.device or q.device.type
        traced = self.device is not None or isinstance(q, FakeTensor)
        if not traced or (device != "cuda" and mask is not None and mask.requires_grad):
            return func(*args, **kwargs)  # real tensors; the CPU's flash attention gives a mask no gradient
        if torch.is_autocast_enabled(q.device.type):
            dtype = torch.get_autocast_dtype(q.device.type)
            q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        if mask is not None:
            if mask.dtype == torch.bool:  # SDPA's own conversion: -inf where a key is masked out
                mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(
                    ~mask, float("-inf")
                )
            mask = mask.to(q.dtype).expand(*q.shape[:-1], k.shape[-2])
        if device == "cuda":
            attention = torch.ops.aten._scaled_dot_product_efficient_attention
            return attention(q, k, v, mask, True, dropout, causal, scale=scale)[0]
        attention = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
        return attention(q, k, v, dropout, causal, attn_mask=mask, scale=scale)[0]


def shadow_of(func, args, kwargs, out: torch.Tensor) -> None:
    """Set ``out.shadow``: ``func`` on the CPU copies of its tensor inputs, when every one has a copy."""
    leaves = tensors_in((args, kwargs))
    if not leaves or not all(hasattr(t, "shadow") for t in leaves):
        return

    def to_cpu(value):
        if isinstance(value, torch.Tensor):
            return value.shadow
        return torch.device("cpu") if isinstance(value, torch.device) else value

    real_args, real_kwargs = pytree.tree_map(to_cpu, (args, kwargs))
    with _disable_current_modes():
        out.shadow = func(*real_args, **real_kwargs)


@contextlib.contextmanager
def cuda_autocast(dtype: torch.dtype | None) -> Iterator[None]:
    """CUDA's autocast policy on (fake) CUDA tensors where no GPU is present (``torch.autocast`` refuses
    there); ``None``: autocast off."""
    if dtype is None:
        yield
        return
    enabled, previous = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", dtype)
    torch.autocast_increment_nesting()
    try:
        yield
    finally:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled("cuda", enabled)
        torch.set_autocast_dtype("cuda", previous)


@contextlib.contextmanager
def module_stack(stack: list[str]) -> Iterator[list[str]]:
    """Keeps ``stack`` the class names of the modules running now, innermost last (global forward hooks)."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    def leave(module, inputs, output):
        stack.pop()

    handles = [
        register_module_forward_pre_hook(lambda module, inputs: stack.append(type(module).__name__)),
        register_module_forward_hook(leave),
    ]
    try:
        yield stack
    finally:
        for handle in handles:
            handle.remove()


def census_of(model: torch.nn.Module, batch: dict, arm: tuple[str, str]) -> Census:
    """The census of one training-mode forward of ``model`` (parameters already fake CUDA) on ``batch``."""
    precision, kernels = arm
    choice, only = kernel_choice(kernels)
    census = Census()
    parameters = {p.untyped_storage()._cdata for p in model.parameters()}
    seen: set[int] = set()
    modules: list[str] = []

    def pack(saved: torch.Tensor) -> torch.Tensor:  # each storage once, charged to the module saving it first
        storage = saved.untyped_storage()._cdata
        if storage not in parameters and storage not in seen:
            seen.add(storage)
            dtype = str(saved.dtype).removeprefix("torch.")
            census.saved[(modules[-1] if modules else "-", dtype)] += saved.untyped_storage().nbytes()
        return saved

    model.train()
    with (
        use_kernels(choice, only=only),
        cuda_autocast(PRECISIONS[precision]),
        torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved),
        module_stack(modules),
        FusedAttention(),
        CensusMode(census, innermost(modules)),
    ):
        model(batch["features"], batch["lengths"])
    return census


def step_census_on_cpu(model: torch.nn.Module, batch: dict, precision: str) -> tuple[Census, Census]:
    """The forward and backward censuses of one training step of ``model`` (parameters fake CPU tensors) with the
    references, under the CPU's autocast: autograd's engine runs no backward on fake CUDA tensors. Faithful to a
    GPU's backward where the CPU's autocast gives the forward CUDA's dtypes (compare the two forwards); SDPA counts
    as CUDA's fused kernel (``FusedAttention("cuda")``) here too."""
    forward, backward, modules = Census(), Census(), []
    dtype = PRECISIONS[precision]
    model.train()
    with use_kernels("reference"):
        with (
            torch.autocast("cpu", dtype=dtype, enabled=dtype is not None),
            module_stack(modules),
            TagNodes(innermost(modules)),
            CudaFloat32Ops(),
            FusedAttention("cuda"),  # a GPU's attention kernel and its backward, as the step is a GPU's
            CensusMode(forward, innermost(modules)),
        ):
            log_probs, _ = model(batch["features"], batch["lengths"])
        with CensusMode(backward, backward_node_module):
            log_probs.sum().backward()
    # or the next call's backward adds into .grad: a pass per parameter more
    model.zero_grad(set_to_none=True)
    return forward, backward


def fake_model(model_name: str, fake, device: str = "cuda", **options: object) -> torch.nn.Module:
    """The model built as training builds it (``options``: model config fields over its variant's), its
    parameters and buffers fake tensors on ``device``."""
    architecture, size = parse_model(model_name)
    model = build_model(
        architecture,
        size,
        input_dim=default_input_dim(architecture),
        vocab_size=VOCAB_SIZE,
        dropout=0.1,
        **options,
    )
    with fake:
        return model._apply(lambda tensor: fake.from_tensor(tensor).to(device))


def fake_batch(model_name: str, args, fake, device: str = "cuda") -> dict:
    """``training_step.synthetic_batch`` as fake tensors on ``device``, the lengths' real values beside them."""
    batch = synthetic_batch(
        args.batch_frames, args.max_frames, torch.device("cpu"), architecture=parse_model(model_name)[0]
    )
    with fake:
        features, lengths = (
            fake.from_tensor(batch["features"]).to(device),
            fake.from_tensor(batch["lengths"]).to(device),
        )
    lengths.shadow = batch["lengths"]
    return {"features": features, "lengths": lengths, "audio_sec": batch["audio_sec"]}


def by_module_lines(census: Census, rows: int) -> list[str]:
    ranked = sorted(census.written, key=lambda key: -census.written[key])[:rows]
    return [
        f"{module:<30} {name:<22} {dtypes:<14} {census.ops[key]:>5} {census.written[key] / GB:>8.2f} "
        f"{census.read[key] / GB:>8.2f}"
        for key in ranked
        for module, name, dtypes in [key]
    ]


def saved_lines(census: Census, rows: int) -> list[str]:
    ranked = sorted(census.saved, key=lambda key: -census.saved[key])[:rows]
    return [
        f"{module:<30} {dtype:<10} {census.saved[(module, dtype)] / GB:>8.2f}" for module, dtype in ranked
    ]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["zipformer:m"], help="ARCHITECTURE:VARIANT")
    parser.add_argument(
        "--arms",
        nargs="+",
        type=parse_arm,
        default=[("f32", "off"), ("bf16", "off"), ("bf16", "auto"), ("bf16", "on")],
        help="PRECISION:KERNELS (default: f32:off bf16:off bf16:auto bf16:on)",
    )
    parser.add_argument("--batch-frames", type=int, default=128_000, help="padded 10 ms frames per batch")
    parser.add_argument("--max-frames", type=int, default=1000, help="the longest utterance's frames")
    parser.add_argument("--by-module", type=parse_arm, help="break this arm down (default: the second arm)")
    parser.add_argument("--rows", type=int, default=15, help="rows of the breakdown")
    parser.add_argument(
        "--backward",
        action="store_true",
        help="also count the backward of the kernels-off arms, on the CPU's autocast (step_census_on_cpu)",
    )
    args = parser.parse_args(argv)
    from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode

    breakdown = args.by_module or args.arms[min(1, len(args.arms) - 1)]
    results = []
    for model_name in args.models:
        fake = FakeTensorMode(allow_non_fake_inputs=True)
        try:
            model, batch = fake_model(model_name, fake), fake_batch(model_name, args, fake)
        except ValueError as error:  # an unknown architecture or size: the registry names the choices
            parser.error(f"--models {model_name}: {error}")
        if args.backward:
            cpu_model, cpu_batch = (
                fake_model(model_name, fake, "cpu"),
                fake_batch(model_name, args, fake, "cpu"),
            )
        shape = "x".join(str(n) for n in batch["features"].shape[:2])
        arms = args.arms if breakdown in args.arms else [*args.arms, breakdown]
        for arm in arms:
            with fake:
                try:
                    census = census_of(model, batch, arm)
                except DataDependentOutputException:
                    parser.error(
                        f"--models {model_name}: its forward reads the values of float tensors (Paraformer's "
                        "CIF does), which fake tensors do not have; it cannot be counted this way"
                    )
            row = {"model": model_name, "arm": ":".join(arm), "batch": shape, **census.totals()}
            row.update(cpu_forward_gb=math.nan, backward_gb=math.nan)
            backward = None
            if args.backward and arm[1] == "off":
                with fake:
                    cpu_forward, backward = step_census_on_cpu(cpu_model, cpu_batch, arm[0])
                row.update(
                    cpu_forward_gb=cpu_forward.totals()["written_gb"],
                    backward_gb=backward.totals()["written_gb"],
                )
            results.append(row)
            if arm == breakdown:
                print_breakdown(f"{model_name} {':'.join(arm)}, batch {shape}", census, backward, args.rows)
    print_rows(results)
    return results


def print_breakdown(title: str, census: Census, backward: Census | None, rows: int) -> None:
    """The arm's largest writers by module, op and dtype, what autograd saves, and the backward's writers."""
    columns = f"{'module':<13} {'op':<22} {'dtype':<14} {'ops':>5} {'GB out':>8} {'GB in':>8}"
    print_table(f"{title}: {columns}", by_module_lines(census, rows))
    print()
    print_table(f"saved for backward, by module: {'dtype':<10} {'GB':>8}", saved_lines(census, rows))
    print()
    if backward is not None:
        print_table(f"its backward (CPU autocast): {columns}", by_module_lines(backward, rows))
        print()


def print_rows(results: list[dict]) -> None:
    first = {row["model"]: row for row in reversed(results)}
    print_table(
        f"{'model':<16} {'arm':<12} {'batch':<9} {'ops':>6} {'casts':>6} {'cast GB':>8} {'GB out':>8} "
        f"{'f32 GB':>8} {'GB in':>8} {'saved GB':>9} {'out/1st':>8} {'bwd GB':>8} {'CPU fwd':>8}",
        [
            f"{r['model']:<16} {r['arm']:<12} {r['batch']:<9} {r['ops']:>6} {r['casts']:>6} {r['cast_gb']:>8.2f} "
            f"{r['written_gb']:>8.2f} {r['written_f32_gb']:>8.2f} {r['read_gb']:>8.2f} {r['saved_gb']:>9.2f} "
            f"{r['written_gb'] / first[r['model']]['written_gb']:>7.2f}x {r['backward_gb']:>8.2f} "
            f"{r['cpu_forward_gb']:>8.2f}"
            for r in results
        ],
    )


if __name__ == "__main__":
    main()
