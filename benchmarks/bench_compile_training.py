"""Does ``torch.compile`` speed up zipformer-demo's CPU training step? (issue 11) Eager vs compiled, and the
cheaper switches (flush denormals, oneDNN off, channels-last, bf16 autocast, padding), side by side.

One step is what ``training.loop`` does per batch on each of ``make demo``'s 2 gloo ranks: forward, float32
CTC loss summed and divided by the batch's target tokens, backward, gradient-norm clip at 5, AdamW. The model
is built by ``training.checkpoint.build_model_from_config`` (zipformer, variant demo, dropout 0.1, feature
masks on), vocabulary 49 (48 pieces + blank, params.yaml). Batch shapes are the demo's: the utterance
lengths and token counts of ``data/04_features/train`` (synthetic 1-12 s lengths when the shards are not
built) planned by ``data.sampler.LengthBucketedBatchSampler`` with params.yaml's budget (4,000 padded
frames, at most 24 utterances), rank 0 of 2, epoch 0: nearly every batch has its own (B, T), B 3-24,
T ~100-1,270. Features are random with log-mel's scale (N(-5, 3)); targets random tokens.

Side by side: for each batch of the sequence every variant takes one step on it, in an order rotated per
batch, so whatever else loads the machine hits all variants alike; ``--repeats`` passes over the sequence
show the noise. Every step of every variant on the same batch starts from the same RNG seed, so eager
variants draw the same dropout and feature masks, and compiled ones too (``fallback_random``: inductor calls
eager's random ops), which makes their losses comparable step by step.

Compiled variants: ``dynamic=True``, or the default (the first shape static, then one recompile to dynamic
shapes), optionally with T padded to a multiple. Padding to 16 is what keeps one graph: the stacks'
``upsample(...)[:, :T']`` adds guards on T' = (T - 7) // 2 modulo 2, 4 and 8, and any T that is a multiple
of 16 gives T' = 4 (mod 8). Three workarounds are applied in this process only, all needed today and named
in docs/results/accuracy-per-minute.md:

- inductor's stride sorting fails on this model with dynamic shapes ("cannot determine truth value of
  Relational", pytorch/pytorch#185510; fix in review, #185871): ``get_fill_order`` is given the graph's
  ShapeEnv, as that fix does. Without it every dynamic variant fails on its second batch shape.
- ``layout_optimization`` is off: on, inductor specializes T on the Conv2d front end's layout check, so
  every batch with a new padded length recompiles the model, ``dynamic=True`` or not.
- ``...-gather`` variants swap ``RelPositionAttentionWeights``' ``as_strided`` relative shift (whose
  ``storage_offset()`` dynamo cannot trace: 2 graph breaks per layer, recompiles per stack width and
  "L['___stack0'] got deallocated" recompiles up to the recompile limit) for an equal ``gather``
  (outputs identical: max abs difference 0).

    .venv/bin/python benchmarks/bench_compile_training.py                 # ~5 min: eager switches, 1 thread
    .venv/bin/python benchmarks/bench_compile_training.py --with-compile  # + compiled (~10 min cold compile)
    .venv/bin/python benchmarks/bench_compile_training.py --threads 1 2 --batches 24 --repeats 3
    .venv/bin/python benchmarks/bench_compile_training.py --variants eager eager-pad16 compile-dynamic-gather-pad16 \\
        --cache-dir /tmp/inductor-cache     # keep the inductor cache: a second run compiles warm
    .venv/bin/python benchmarks/bench_compile_training.py --list          # every variant
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import logging
import math
import os
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

# The step, compile counters and table the training-step benchmarks share.
from training_step import compiled_graphs, cpu_seconds, print_table, train_step

from asr_pipeline.data.sampler import LengthBucketedBatchSampler
from asr_pipeline.modules.zipformer_blocks import RelPositionAttentionWeights
from asr_pipeline.training.checkpoint import build_model_from_config
from asr_pipeline.training.config import DataConfig, ModelConfig, TrainConfig

REPO = Path(__file__).resolve().parents[1]
TRAIN_SHARDS = REPO / "data" / "04_features" / "train"
VOCAB_SIZE = 49  # params.yaml tokenizer.vocab_size 48 pieces + blank
BATCH_BUDGET = 4000  # params.yaml train.data.adaptive_batch_budget: padded frames per batch per rank
MAX_SAMPLES = 24  # params.yaml train.data.adaptive_batch_max_samples
WORLD_SIZE = 2  # params.yaml train.launch.nproc_per_node
TOKENS_PER_FRAME = 0.15  # the demo train split: 1 target token per 6-7 fbank frames
LEARNING_RATE, WEIGHT_DECAY = 2e-3, 5e-4  # params.yaml train.optim
FRAME_SEC = 0.01
DEMO_EPOCHS = 10  # params.yaml train.optim.epochs


@dataclass(frozen=True)
class Variant:
    """One way of running the step. ``compile``: ``torch.compile`` keyword arguments (None: eager)."""

    name: str
    compile: dict | None = None
    gather_rel_shift: bool = False  # graph-break-free relative shift (module docstring)
    pad_multiple: int = 1  # pad T up to a multiple of this (1: the batch's longest utterance)
    bf16: bool = False  # torch.autocast("cpu", bfloat16) around the forward, as run.precision=bf16 does
    flush_denormal: bool = False
    mkldnn: bool = True  # False: torch.backends.mkldnn off (convolutions fall back to ATen's own kernels)
    channels_last: bool = False  # 4-D weights (the Conv2d front end) in channels-last memory format


VARIANTS = {
    v.name: v
    for v in [
        Variant("eager"),
        Variant("flush-denormal", flush_denormal=True),
        Variant("mkldnn-off", mkldnn=False),
        Variant("channels-last", channels_last=True),
        Variant("channels-last-flush-denormal", channels_last=True, flush_denormal=True),
        Variant("bf16-autocast", bf16=True),
        Variant("eager-pad64", pad_multiple=64),
        Variant("eager-pad16", pad_multiple=16),
        Variant("eager-gather", gather_rel_shift=True),
        Variant("compile-dynamic", compile={"dynamic": True}),  # the model as it is: graph breaks
        Variant("compile-dynamic-gather", compile={"dynamic": True}, gather_rel_shift=True),
        Variant("compile-dynamic-gather-pad16", compile={"dynamic": True}, gather_rel_shift=True, pad_multiple=16),
        Variant("compile-default-gather-pad16", compile={}, gather_rel_shift=True, pad_multiple=16),
        Variant("compile-dynamic-gather-pad16-bf16", compile={"dynamic": True}, gather_rel_shift=True,
                pad_multiple=16, bf16=True),
    ]
}  # fmt: skip
# The default run (~5 min) leaves compiling out: a cold compile of the step takes ~10 min on the 2-core box.
DEFAULT_VARIANTS = ["eager", "flush-denormal", "mkldnn-off", "channels-last", "bf16-autocast", "eager-pad16"]
COMPILED_VARIANT = "compile-dynamic-gather-pad16"  # the one configuration that compiles once (--with-compile)


# --- batch shapes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchShape:
    frames: tuple[int, ...]  # (B,) real frames T of each utterance
    tokens: tuple[int, ...]  # (B,) target tokens U

    @property
    def audio_sec(self) -> float:
        return sum(self.frames) * FRAME_SEC


def demo_lengths() -> tuple[np.ndarray, np.ndarray, str]:
    """Frames and tokens per training utterance: the demo's shards when built, else a synthetic split."""
    shards = sorted(glob.glob(str(TRAIN_SHARDS / "*.parquet")))
    if shards:
        import pyarrow.parquet as pq

        frames, tokens = [], []
        for shard in shards:
            table = pq.read_table(shard, columns=["rows", "tokens"])
            frames += table.column("rows").to_pylist()
            tokens += [len(t) for t in table.column("tokens").to_pylist()]
        return np.array(frames), np.array(tokens), f"{len(frames)} utterances of {TRAIN_SHARDS}"
    rng = np.random.default_rng(0)
    frames = rng.integers(100, 1201, 1500)  # the demo corpus: 1-12 s
    tokens = np.maximum(1, np.round(frames * TOKENS_PER_FRAME)).astype(int)
    return frames, tokens, "1500 synthetic utterances of 1-12 s (no shards: run make demo for the real ones)"


def demo_batch_shapes(count: int) -> tuple[list[BatchShape], int, str]:
    """The first ``count`` batches of rank 0's epoch-0 plan, and how many batches that epoch has."""
    frames, tokens, source = demo_lengths()
    sampler = LengthBucketedBatchSampler(
        frames, budget=BATCH_BUDGET, max_samples=MAX_SAMPLES, num_replicas=WORLD_SIZE, rank=0, seed=0
    )
    plan = sampler.epoch_batches(0)
    shapes = [BatchShape(tuple(frames[b].tolist()), tuple(tokens[b].tolist())) for b in plan[:count]]
    return shapes, len(plan), source


def make_batch(shape: BatchShape, pad_multiple: int, seed: int) -> dict[str, Tensor]:
    """Zero-padded like ``data.collate``; the same values whatever ``pad_multiple`` adds."""
    generator = torch.Generator().manual_seed(seed)
    frames = torch.tensor(shape.frames)  # (B,)
    longest = int(frames.max())
    features = torch.randn(len(shape.frames), longest, 80, generator=generator) * 3.0 - 5.0  # (B, T, F)
    features = features * (torch.arange(longest)[None, :] < frames[:, None]).unsqueeze(-1)
    padded = math.ceil(longest / pad_multiple) * pad_multiple
    features = F.pad(features, (0, 0, 0, padded - longest))  # (B, T_padded, F)
    target_lengths = torch.tensor(shape.tokens)  # (B,)
    targets = torch.randint(1, VOCAB_SIZE, (len(shape.tokens), max(shape.tokens)), generator=generator)
    return {"features": features, "lengths": frames, "targets": targets, "target_lengths": target_lengths}


# --- workarounds (module docstring) ---------------------------------------------------------------------
def patch_inductor_stride_order() -> None:
    """Give inductor's ``get_fill_order`` the graph's ShapeEnv when a caller passes none (#185871's fix)."""
    import sympy
    import torch._inductor.ir as inductor_ir
    from torch._inductor.virtualized import V

    original = inductor_ir.get_fill_order
    if getattr(original, "patched_for_bench", False):
        return

    def get_fill_order(seq, shape_env=None):
        if shape_env is None and not all(isinstance(s, int | sympy.Integer) for s in seq):
            with contextlib.suppress(Exception):  # no graph is being lowered: keep the original behaviour
                shape_env = V.graph.sizevars.shape_env
        return original(seq, shape_env)

    get_fill_order.patched_for_bench = True  # type: ignore[attr-defined]
    inductor_ir.get_fill_order = get_fill_order


class GatherRelPositionAttentionWeights(RelPositionAttentionWeights):
    """The same weights with the relative shift as a ``gather`` instead of ``as_strided``, which dynamo
    cannot trace (it reads ``storage_offset()``)."""

    def shift_to_keys(self, pos_scores: Tensor) -> Tensor:
        *_, frames, _ = pos_scores.shape  # (B, H, T, 2T-1); index = offset + T-1
        rows = torch.arange(frames, device=pos_scores.device)
        offsets = (frames - 1) + rows[None, :] - rows[:, None]  # (T, T): row i, column j reads j - i
        return pos_scores.gather(-1, offsets.expand(*pos_scores.shape[:-1], frames))  # (B, H, T, T)


# --- one runner per (variant, threads) --------------------------------------------------------------------
@dataclass
class Runner:
    variant: Variant
    threads: int
    model: nn.Module
    forward: nn.Module  # the model, or its compiled wrapper
    optimizer: torch.optim.Optimizer
    records: list[dict] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.variant.name}@{self.threads}t"


def build_runner(variant: Variant, threads: int) -> Runner:
    config = TrainConfig(
        data=DataConfig(train_manifests=[]), model=ModelConfig(architecture="zipformer", variant="demo")
    )
    torch.manual_seed(0)  # the same initial weights for every runner
    model, _ = build_model_from_config(config, VOCAB_SIZE)
    if variant.gather_rel_shift:
        for module in model.modules():
            if type(module) is RelPositionAttentionWeights:
                module.__class__ = GatherRelPositionAttentionWeights
    if variant.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [  # training.loop: decay matrices and conv kernels only
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=LEARNING_RATE)
    forward = torch.compile(model, **variant.compile) if variant.compile is not None else model
    return Runner(variant, threads, model, forward, optimizer)


@contextlib.contextmanager
def switches(variant: Variant, threads: int):
    """Process-wide settings for one step, put back afterwards."""
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    torch.set_flush_denormal(variant.flush_denormal)
    try:
        with torch.backends.mkldnn.flags(enabled=variant.mkldnn):
            yield
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(previous_threads)


def step(runner: Runner, batch: dict[str, Tensor]) -> float:
    precision = "bf16" if runner.variant.bf16 else "f32"
    return float(train_step(runner.forward, runner.optimizer, batch, precision, torch.device("cpu")))


def run(runners: list[Runner], shapes: list[BatchShape], repeats: int) -> None:
    batches: dict[tuple[int, int], dict[str, Tensor]] = {}
    for repeat in range(repeats):
        for index, shape in enumerate(shapes):
            shift = (index + repeat) % len(runners)
            for runner in runners[shift:] + runners[:shift]:
                pad = runner.variant.pad_multiple
                if (index, pad) not in batches:
                    batches[index, pad] = make_batch(shape, pad, seed=index)
                batch = batches[index, pad]
                torch.manual_seed(1000 * repeat + index)  # the same dropout draws for every variant
                graphs = compiled_graphs()
                with switches(runner.variant, runner.threads):
                    started, cpu_started = time.perf_counter(), cpu_seconds()
                    loss = step(runner, batch)
                    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
                runner.records.append(
                    {
                        "repeat": repeat,
                        "batch": index,
                        "B": len(shape.frames),
                        "T": int(batch["features"].shape[1]),
                        "audio_sec": shape.audio_sec,
                        "seconds": seconds,
                        "cpu_seconds": cpu,
                        "loss": loss,
                        "new_graphs": compiled_graphs() - graphs,
                    }
                )
            done = ", ".join(f"{r.key} {r.records[-1]['seconds']:.2f}s" for r in runners)
            print(f"pass {repeat + 1} batch {index + 1}/{len(shapes)} (B={len(shape.frames)}, "
                  f"T={max(shape.frames)}): {done}", flush=True)  # fmt: skip


# --- the tables ---------------------------------------------------------------------------------------
def summarize(runner: Runner, eager: Runner, reference: Runner, warmup: int, parity_steps: int) -> dict:
    """Steady steps (past warm-up, no compile in them) against eager's steps on the same batches; losses
    against ``reference``'s (padding changes the dropout draws, so padded variants compare with eager on
    the same padding)."""
    steady = [
        (mine, base)
        for mine, base in zip(runner.records, eager.records, strict=True)
        if not (mine["repeat"] == 0 and mine["batch"] < warmup) and mine["new_graphs"] == 0
    ]

    def total(key: str, which: int) -> float:
        return sum(pair[which][key] for pair in steady)

    audio = total("audio_sec", 0)
    per_pass = []
    for repeat in sorted({m["repeat"] for m, _ in steady}):
        pairs = [(m, b) for m, b in steady if m["repeat"] == repeat]
        per_pass.append(sum(m["seconds"] for m, _ in pairs) / sum(b["seconds"] for _, b in pairs))
    ratios = [m["seconds"] / b["seconds"] for m, b in steady]
    compiles = [r for r in runner.records if r["new_graphs"]]

    def compile_cost(key: str) -> list[float]:
        # A compiling step's cost above what the step itself takes at this variant's steady rate.
        rate = total(key, 0) / audio
        return [r[key] - rate * r["audio_sec"] for r in compiles]

    wall, cpu = compile_cost("seconds"), compile_cost("cpu_seconds")
    first = zip(runner.records[:parity_steps], reference.records, strict=False)
    return {
        "variant": runner.variant.name,
        "threads": runner.threads,
        "steady_steps": len(steady),
        "ms_per_audio_sec": 1e3 * total("seconds", 0) / audio,
        "mean_step_sec": total("seconds", 0) / len(steady),
        "vs_eager": total("seconds", 0) / total("seconds", 1),
        "vs_eager_per_pass": per_pass,
        "ratio_p10_p90": (float(np.percentile(ratios, 10)), float(np.percentile(ratios, 90))),
        "vs_eager_cpu": total("cpu_seconds", 0) / total("cpu_seconds", 1),
        "loss_rel_diff": max(abs(m["loss"] - b["loss"]) / abs(b["loss"]) for m, b in first),
        "compiling_steps": [f"{r['repeat'] + 1}.{r['batch'] + 1}" for r in compiles],  # pass.batch
        "graphs": sum(r["new_graphs"] for r in compiles),
        "first_compile_sec": wall[0] if wall else 0.0,
        "first_compile_cpu_sec": cpu[0] if cpu else 0.0,
        "recompile_sec": sum(wall[1:]),
        "recompile_cpu_sec": sum(cpu[1:]),
    }


def print_tables(rows: list[dict]) -> None:
    header = (
        f"{'variant':>34} {'thr':>3} | {'ms/audio-s':>10} {'vs eager':>8} {'per pass':>11} {'p10-p90':>9} "
        f"{'CPU-s vs eager':>14} | {'loss rel diff':>13}"
    )
    print_table(header, (
        f"{r['variant']:>34} {r['threads']:>3} | {r['ms_per_audio_sec']:10.1f} {r['vs_eager']:8.3f} "
        f"{'/'.join(f'{v:.2f}' for v in r['vs_eager_per_pass']):>11} "
        f"{r['ratio_p10_p90'][0]:4.2f}-{r['ratio_p10_p90'][1]:4.2f} {r['vs_eager_cpu']:14.3f} | "
        f"{r['loss_rel_diff']:13.1e}"
        for r in rows
    ))  # fmt: skip
    compiled = [r for r in rows if VARIANTS[r["variant"]].compile is not None]
    if not compiled:
        return
    header = (
        f"{'compiled variant':>34} {'thr':>3} | {'graphs':>6} {'first: wall s':>13} {'CPU s':>6} | "
        f"{'recompiles':>10} {'wall s':>6} {'CPU s':>6} | compiling steps (pass.batch)"
    )
    print()
    print_table(header, (
        f"{r['variant']:>34} {r['threads']:>3} | {r['graphs']:>6} {r['first_compile_sec']:13.1f} "
        f"{r['first_compile_cpu_sec']:6.1f} | {max(0, len(r['compiling_steps']) - 1):>10} "
        f"{r['recompile_sec']:6.1f} {r['recompile_cpu_sec']:6.1f} | {' '.join(r['compiling_steps'])}"
        for r in compiled
    ))  # fmt: skip


def print_projection(rows: list[dict], steps_per_epoch: int, shapes: int) -> None:
    """What compiling would save over the demo's epochs of ``steps_per_epoch`` steps per rank."""
    eager = {r["threads"]: r for r in rows if r["variant"] == "eager"}
    compiled = [r for r in rows if VARIANTS[r["variant"]].compile is not None]
    if not compiled:
        return
    print(f"\nprojection: {DEMO_EPOCHS} epochs x {steps_per_epoch} steps per rank at this run's mean step "
          f"times; compile = first + recompiles seen in {shapes} shapes, in CPU seconds (a rank's wall "
          f"seconds when each of the 2 ranks has a core), later shapes assumed to recompile no more")  # fmt: skip
    for r in compiled:
        base = eager[r["threads"]]
        saved_per_epoch = steps_per_epoch * (base["mean_step_sec"] - r["mean_step_sec"])
        compile_total = r["first_compile_cpu_sec"] + r["recompile_cpu_sec"]
        print(
            f"  {r['variant']}@{r['threads']}t: {saved_per_epoch:+.1f} s per epoch (eager's steps "
            f"~{steps_per_epoch * base['mean_step_sec']:.0f} s), compile {compile_total:.0f} s once -> "
            f"net {DEMO_EPOCHS * saved_per_epoch - compile_total:+.0f} s over {DEMO_EPOCHS} epochs"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    parser.add_argument(
        "--with-compile", action="store_true", help=f"add {COMPILED_VARIANT} (~10 min more with a cold cache)"
    )
    parser.add_argument("--threads", nargs="+", type=int, default=[1], help="torch threads (a rank has 1)")
    parser.add_argument("--batches", type=int, default=12, help="batch shapes from the demo's epoch plan")
    parser.add_argument("--repeats", type=int, default=2, help="passes over the batch sequence")
    parser.add_argument("--warmup", type=int, default=2, help="first batches of pass 1 left out of the times")
    parser.add_argument("--parity-steps", type=int, default=3, help="first steps whose losses are compared")
    parser.add_argument(
        "--cache-dir",
        help="inductor cache (TORCHINDUCTOR_CACHE_DIR); default: a fresh temporary one, so compile times "
        "are cold, as on a fresh machine",
    )
    parser.add_argument(
        "--inductor-random",
        action="store_true",
        help="inductor's own RNG in compiled steps (faster dropout, but their losses no longer follow eager's)",
    )
    parser.add_argument("--list", action="store_true", help="list the variants and exit")
    parser.add_argument("--json", help="write the per-step records and the summary rows to this file")
    args = parser.parse_args()
    if args.list:
        for variant in VARIANTS.values():
            print(f"{variant.name:>34}: {asdict(variant)}")
        return
    variants = ["eager"] + [name for name in args.variants if name != "eager"]
    if args.with_compile and COMPILED_VARIANT not in variants:
        variants.append(COMPILED_VARIANT)
    temporary = None
    if any(VARIANTS[name].compile is not None for name in variants):
        if args.cache_dir is None:
            temporary = tempfile.TemporaryDirectory(prefix="inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.cache_dir or temporary.name
        import torch._dynamo.config as dynamo_config
        import torch._inductor.config as inductor_config

        patch_inductor_stride_order()
        inductor_config.fallback_random = not args.inductor_random
        dynamo_config.recompile_limit = 64  # count recompiles rather than fall back to eager at 8
        inductor_config.compile_threads = 1  # the compiler runs as our child: its CPU time is counted
        # With layout optimization inductor weighs channels-last for the front end's Conv2d and, doing so,
        # pins T to the first batch's value (a guard from is_channels_last_contiguous_2d): every new T
        # then recompiles the whole model (5-10 min each here). Off, T stays symbolic.
        inductor_config.layout_optimization = False
    warnings.filterwarnings("ignore", message="Dynamo does not know how to trace")
    warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")  # mkldnn.flags()
    # The one expected graph break (Zipformer.forward's int(lengths.min())) and a CPU-only machine's CUDA
    # notice would otherwise print their multi-line warnings into the progress lines.
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    shapes, steps_per_epoch, source = demo_batch_shapes(args.batches)
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; shapes from {source}: "
          f"{len(shapes)} of rank 0's {steps_per_epoch} batches, "
          f"B {min(len(s.frames) for s in shapes)}-{max(len(s.frames) for s in shapes)}, "
          f"T {min(max(s.frames) for s in shapes)}-{max(max(s.frames) for s in shapes)}")  # fmt: skip
    runners = [build_runner(VARIANTS[name], threads) for threads in args.threads for name in variants]
    started = time.perf_counter()
    run(runners, shapes, args.repeats)
    rows = []
    for runner in runners:
        eager = next(r for r in runners if r.variant.name == "eager" and r.threads == runner.threads)
        same_padding = [
            r
            for r in runners
            if r.variant == Variant(r.variant.name, pad_multiple=runner.variant.pad_multiple)
            and r.threads == runner.threads
        ]
        reference = same_padding[0] if same_padding else eager
        rows.append(summarize(runner, eager, reference, args.warmup, args.parity_steps))
    print(f"\n{time.perf_counter() - started:.0f} s; load average now {os.getloadavg()[0]:.1f}. vs eager: "
          "step time over eager's on the same steady batches (< 1: faster); per pass: the same per pass; "
          "p10-p90: spread of per-batch ratios; CPU-s: the same in CPU seconds; loss rel diff: max over the first "
          "steps, same seeds, against eager with the same padding")  # fmt: skip
    print_tables(rows)
    print_projection(rows, steps_per_epoch, len(shapes))
    if args.json:
        with open(args.json, "w") as handle:
            records = {r.key: r.records for r in runners}
            json.dump({"rows": rows, "records": records}, handle, indent=1, default=str)
    if temporary is not None:
        temporary.cleanup()


if __name__ == "__main__":
    main()
