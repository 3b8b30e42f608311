"""``torch.compile`` for training (issue 36): static or dynamic time axes, the compile cache reused across
runs and resumes, and counts of graph breaks and recompilations.

Shapes. A compiled model specialises on its input shapes: with the default ``dynamic=None`` the first
batch's (B, T) compiles a static graph, the second distinct shape recompiles with dynamic sizes, and any
size the graph branches on (Zipformer's T' modulo 2, 4 and 8) adds guards that recompile again. Two ways
to keep a run of varying batches to a few graphs:

- bucketed static shapes: ``data.batching.TimeBuckets`` pads every batch's T to one of a few lengths;
  each bucket compiles once (``mark_batch_shapes(..., "buckets")``: B dynamic, T static), at the price
  of the padded frames the sampler reports;
- a dynamic time axis: ``mark_batch_shapes(..., "dynamic")`` marks T dynamic before the first call, so
  the first compile is already symbolic in T (fewer graphs, kernels generic in T).

In a run. ``run.compile`` (a mode name: off, default, reduce-overhead, max-autotune, ...) compiles the
model the training step calls (``training.hooks.CompileHook``; validation and the dry run stay eager);
``data.pad_to_buckets`` makes the loader pad every training batch to a bucket, and the shapes are marked
"buckets" (else dynamo's default, "auto"). The run's "compile" events carry ``CompileCounts`` and the
time to the first optimizer step.

The cache. Inductor keeps its compiled kernels and FX graphs on disk in ``TORCHINDUCTOR_CACHE_DIR``
(default ``/tmp/torchinductor_<user>``, lost with /tmp) and AOTAutograd's graphs alongside.
``CompileCache`` points that variable at a folder the run names (``<cache>/inductor``) and keeps torch's
"mega-cache" (``torch.compiler.save_cache_artifacts``: every cached artifact of this process in one
blob) as ``<cache>/artifacts.bin``: ``load`` before the first compiled step, ``save`` after the compiled
shapes have been seen. A second run or a resume with the same folder then compiles from the cache.
A run's folder is ``run.compile_cache``, by default the per-user ``default_cache_dir()``
(``$XDG_CACHE_HOME/asr_pipeline/compile``): not the run dir, which ``dvc repro`` deletes before the train
stage reruns. Inductor keys every entry by the graph, the torch version and the device, so runs of other
models or versions share the folder without mixing.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from asr_pipeline.training.config.run import COMPILE_SCOPES, CompileScope

Shapes = Literal["auto", "buckets", "dynamic"]
SHAPE_MODES: tuple[str, ...] = ("auto", "buckets", "dynamic")
ARTIFACTS = "artifacts.bin"


def compile_model(
    model: nn.Module,
    fullgraph: bool = False,
    backend: str = "inductor",
    mode: str = "default",
    scope: CompileScope = "model",
    shapes: Shapes = "auto",
    options: dict[str, object] | None = None,
) -> nn.Module:
    """``torch.compile(model)`` with dynamo's default shape handling; ``mark_batch_shapes`` on each
    batch's tensors says which sizes vary. ``fullgraph`` turns a graph break into an error. ``backend``:
    ``inductor`` for speed; ``aot_eager`` traces forward and backward the same way without generating
    kernels (graph breaks and recompilations are dynamo's, so they count the same; on the 2-core dev box
    inductor took 384 s for one shape of the tiny Zipformer's training step, aot_eager 20 s). ``mode``:
    inductor's (default, reduce-overhead, max-autotune, ...); other backends take none. The returned
    module shares ``model``'s parameters (its state dict keys gain an ``_orig_mod.`` prefix: save
    ``model``'s). ``scope``: "model" compiles the whole forward, "layers" each repeated layer on its own
    (``LayerCompiled``, which marks its layers' inputs as ``shapes`` says: ``mark_batch_shapes`` marks
    only the model's). ``options``: inductor config settings on top of the mode's (``run.compile_options``)."""
    if scope not in COMPILE_SCOPES:
        raise ValueError(f"compile scope must be one of {', '.join(COMPILE_SCOPES)}; got {scope!r}")

    def compiled(module: nn.Module) -> nn.Module:
        if backend != "inductor":
            return torch.compile(module, fullgraph=fullgraph, backend=backend)
        if options:  # torch.compile takes a mode or options, not both: the mode's own options, then these
            from torch._inductor import list_mode_options

            settings = {**list_mode_options(mode), **options}
            return torch.compile(module, fullgraph=fullgraph, backend=backend, options=settings)
        return torch.compile(module, fullgraph=fullgraph, backend=backend, mode=mode)

    return compiled(model) if scope == "model" else LayerCompiled(model, compiled, shapes)


def repeated_layers(model: nn.Module) -> list[tuple[nn.ModuleList, int]]:
    """Where ``model``'s repeated layers sit, as (list, index): every item of an ``nn.ModuleList`` that holds
    no ``nn.ModuleList`` itself (Zipformer's encoder layers inside its list of stacks, a Conformer's
    blocks), in module order."""
    sites = []
    for module in model.modules():
        if isinstance(module, nn.ModuleList):
            sites += [
                (module, index)
                for index, item in enumerate(module)
                if not any(isinstance(inner, nn.ModuleList) for inner in item.modules())
            ]
    return sites


class LayerCompiled(nn.Module):
    """``model`` with each repeated layer (``repeated_layers``) run through its own ``torch.compile``:
    regional compilation. Layers of one class and shape share dynamo's compiled graph (their parameters
    are graph inputs), so a cold compile traces each distinct layer once: Zipformer-M's 16 layers are 4
    graphs (stacks of equal width and frame rate share one). The glue between layers (front end, down-
    and upsampling, output) runs eagerly, and no fusion crosses a layer's edge.

    Shapes. A layer's inputs are made inside the model, so the marks on the model's batch do not reach
    them; each call marks them as ``shapes`` says (``mark_input_shapes``): with "buckets", batch sizes
    vary and every other size is static, as in a whole compiled model (left to dynamo, the second stack's
    other width and frame rate would make every size of the layer's graph dynamic, its kernels generic).

    ``model`` itself stays eager, for validation and checkpoints: its lists hold the compiled wrappers only
    while this module's forward runs. Dynamo keeps one cache per code object, which every layer of the
    class shares, so its recompile limit is raised to 8 entries per distinct layer (a layer compiles again
    for each bucket length, as a whole model does, and dynamo may keep apart a layer whose input is a view:
    the first of a stack, after the downsampling)."""

    def __init__(
        self, model: nn.Module, compile_layer: Callable[[nn.Module], nn.Module], shapes: Shapes = "auto"
    ) -> None:
        super().__init__()
        _check_shapes(shapes)
        self.model = model
        self.sites = repeated_layers(model)
        if not self.sites:
            raise ValueError(
                f"{type(model).__name__} has no repeated layers (items of an nn.ModuleList) to compile one "
                "by one: compile the whole model (compile scope 'model')"
            )
        # a plain list, not submodules: the parameters are the model's, reached once through self.model
        self.compiled = [_Marked(compile_layer(modules[index]), shapes) for modules, index in self.sites]
        distinct = {
            (type(modules[index]), tuple(p.shape for p in modules[index].parameters()))
            for modules, index in self.sites
        }
        self.recompile_limit = max(torch._dynamo.config.recompile_limit, 8 * len(distinct))

    def __getattr__(self, name: str) -> Any:
        """The model's attributes (its config, ``output_lengths``, ...), as a whole compiled model gives."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "model":
                raise
            return getattr(self.model, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        originals = [modules[index] for modules, index in self.sites]
        for (modules, index), layer in zip(self.sites, self.compiled, strict=True):
            modules[index] = layer
        try:
            with torch._dynamo.config.patch(recompile_limit=self.recompile_limit):
                return self.model(*args, **kwargs)
        finally:
            for (modules, index), layer in zip(self.sites, originals, strict=True):
                modules[index] = layer


class _Marked(nn.Module):
    """A compiled layer whose inputs are marked (``mark_input_shapes``) before each call."""

    def __init__(self, layer: nn.Module, shapes: Shapes) -> None:
        super().__init__()
        self.layer, self.shapes = layer, shapes

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        mark_input_shapes(args, self.shapes)
        return self.layer(*args, **kwargs)


def default_cache_dir() -> Path:
    """The per-user compile cache: ``$XDG_CACHE_HOME/asr_pipeline/compile`` (``~/.cache/...``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "asr_pipeline" / "compile"


def mark_batch_shapes(features: Tensor, lengths: Tensor, shapes: Shapes) -> None:
    """Tell dynamo which sizes of a (B, T, F) batch and its (B,) lengths vary, before the compiled call.

    ``buckets``: B varies (a symbol from the first call: batch sizes vary within a bucket), T stays
    static (one graph per bucket length: ``data.batching.TimeBuckets`` pads T to a few). ``dynamic``: B
    and T are symbols from the first call, so most new lengths reuse the graph (kernels are generic in T;
    a model that branches on T, as Zipformer's upsampling does on T' modulo 8, still adds guards).
    ``auto``: dynamo's default, each size static until it changes once, then dynamic.
    """
    mark_input_shapes((features, lengths), shapes)


def _check_shapes(shapes: str) -> None:
    if shapes not in SHAPE_MODES:
        raise ValueError(f"compile shapes must be one of {', '.join(SHAPE_MODES)}; got {shapes!r}")


def mark_input_shapes(args: tuple[Any, ...], shapes: Shapes) -> None:
    """Mark the tensors of a compiled call (a batch's features and lengths, or a layer's inputs) as
    ``mark_batch_shapes`` says. The batch size is the first tensor's first size; a tensor whose first size
    equals it is batch-first (x, lengths, a mask), any other (relative positions) has no batch axis.
    "buckets": the batch axis dynamic, every other size static; "dynamic": the batch and time axes of
    batch-first tensors dynamic; "auto": no marks."""
    _check_shapes(shapes)
    tensors = [arg for arg in args if isinstance(arg, Tensor)]
    if shapes == "auto" or not tensors:
        return
    batch = tensors[0].size(0)
    for tensor in tensors:
        batch_first = tensor.dim() > 0 and tensor.size(0) == batch
        if batch_first:  # maybe_: a batch of one stays specialised rather than failing the mark
            torch._dynamo.maybe_mark_dynamic(tensor, 0)
        if shapes == "dynamic":
            if batch_first and tensor.dim() > 1:
                torch._dynamo.maybe_mark_dynamic(tensor, 1)
            continue
        for dim in range(1 if batch_first else 0, tensor.dim()):
            torch._dynamo.mark_static(tensor, dim)


@dataclass(frozen=True)
class CompileCounts:
    """What dynamo did between two ``compile_counts()`` snapshots (``after - before``).

    ``compiles``: frames dynamo compiled (the first compile of each frame included; with no graph break a
    model's forward is one frame, so ``compiles - 1`` are recompilations); ``recompiles``: compiles a
    failed guard caused (each has a ``recompile_reason`` in dynamo's compilation metrics); ``graphs``: FX
    graphs captured; ``graph_breaks``: breaks, by reason in dynamo's counters; ``cache_hits`` /
    ``cache_misses``: inductor's FX-graph cache (a warm cache shows hits and no misses);
    ``compile_sec``: dynamo's and the backend's compile time, forward and backward. ``recompiles`` and
    ``compile_sec`` come from dynamo's compilation metrics, which keep the process's last 64 compiles.
    """

    compiles: int
    recompiles: int
    graphs: int
    graph_breaks: int
    cache_hits: int
    cache_misses: int
    compile_sec: float

    def __sub__(self, other: CompileCounts) -> CompileCounts:
        return CompileCounts(
            self.compiles - other.compiles,
            max(0, self.recompiles - other.recompiles),
            self.graphs - other.graphs,
            self.graph_breaks - other.graph_breaks,
            self.cache_hits - other.cache_hits,
            self.cache_misses - other.cache_misses,
            max(0.0, self.compile_sec - other.compile_sec),
        )

    def to_dict(self) -> dict[str, int | float]:
        return {**dataclasses.asdict(self), "compile_sec": round(self.compile_sec, 3)}


def compile_counts() -> CompileCounts:
    """dynamo's and inductor's process-wide counters now; subtract two snapshots for one run's counts."""
    counters = torch._dynamo.utils.counters
    metrics = torch._dynamo.utils.get_compilation_metrics()
    seconds = sum(
        (m.entire_frame_compile_time_s or 0.0) + (m.backward_cumulative_compile_time_us or 0) / 1e6
        for m in metrics
    )
    return CompileCounts(
        compiles=int(counters["frames"]["ok"]),
        recompiles=sum(1 for m in metrics if m.recompile_reason),
        graphs=int(counters["stats"]["unique_graphs"]),
        graph_breaks=int(sum(counters["graph_break"].values())),
        cache_hits=int(counters["inductor"]["fxgraph_cache_hit"]),
        cache_misses=int(counters["inductor"]["fxgraph_cache_miss"]),
        compile_sec=seconds,
    )


class CompileCache:
    """A folder holding one run's (or one project's) compile caches: ``inductor/`` for inductor's and
    AOTAutograd's on-disk caches, and ``artifacts.bin`` for torch's mega-cache (module docstring)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @property
    def inductor_dir(self) -> Path:
        return self.folder / "inductor"

    @property
    def artifacts_path(self) -> Path:
        return self.folder / ARTIFACTS

    @contextmanager
    def active(self) -> Iterator[CompileCache]:
        """Within the block, inductor reads and writes ``inductor_dir`` (it reads the variable at each
        lookup); the previous value comes back after."""
        self.inductor_dir.mkdir(parents=True, exist_ok=True)
        previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(self.inductor_dir)
        try:
            yield self
        finally:
            if previous is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous

    def load(self) -> bool:
        """Load ``artifacts.bin`` into torch's caches, before the first compile; False when there is none
        (a first run). A file torch cannot read (another torch version) is an error naming it."""
        if not self.artifacts_path.is_file():
            return False
        try:
            info = torch.compiler.load_cache_artifacts(self.artifacts_path.read_bytes())
        except Exception as error:
            raise RuntimeError(
                f"{self.artifacts_path}: torch cannot load these compile-cache artifacts ({error}); "
                "delete the file (it is rebuilt by the next compiled run) or use another cache folder"
            ) from error
        return info is not None

    def save(self) -> int:
        """Write every compile artifact of this process to ``artifacts.bin`` (atomically, so a run killed
        mid-write leaves the previous file); returns its size in bytes, 0 when nothing was compiled."""
        saved = torch.compiler.save_cache_artifacts()
        if saved is None:
            return 0
        blob, _info = saved
        self.folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=self.folder, delete=False, suffix=".tmp") as handle:
            handle.write(blob)
        os.replace(handle.name, self.artifacts_path)
        return len(blob)


__all__ = [
    "ARTIFACTS",
    "SHAPE_MODES",
    "CompileCache",
    "CompileCounts",
    "LayerCompiled",
    "Shapes",
    "compile_counts",
    "compile_model",
    "default_cache_dir",
    "mark_batch_shapes",
    "mark_input_shapes",
    "repeated_layers",
]
