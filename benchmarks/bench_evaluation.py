"""Where `make demo`'s tune_decoding and evaluate stages spend their time, and the forward pass batched in shard
order (as before) against batched by length (decoding.inference.SORT_WINDOW), with the results of both compared.

On one trained run, the demo's dev and test feature shards, its lexicon and LMs and params.yaml ``decoding``, in
this one process:

- start-up: what every `kedro run --pipelines=<stage>` process pays before its node runs (the project bootstrap,
  the pipeline registry, the evaluate node's imports), timed in a fresh child process;
- the acoustic model's forward pass over dev and test, both batchings, and its padding (padded frames run against
  real frames);
- tuning on dev (params.yaml ``decoding.tune``): every grid point's decoder build and decode;
- one evaluation of test (greedy and every tuned decoder).

Then the tuned values and every metric of both batchings are compared (they must be equal) and the stages'
total is estimated as `make demo` runs them: 1 tune_decoding + 10 evaluations (dev, test, test_open and six
conditions of test's size), each a process of its own. Times are CPU seconds of this process (all its threads)
and wall seconds; on a shared machine CPU seconds move less with other work, and the table states the load.

    .venv/bin/python benchmarks/bench_evaluation.py                 # make demo's run and data/
    .venv/bin/python benchmarks/bench_evaluation.py --run-dir RUN --data DIR
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch
import yaml

from asr_pipeline.decoding.decoders import DecodingResources
from asr_pipeline.decoding.evaluation import EvaluationParams, decode_and_score, greedy_decoder, load_run
from asr_pipeline.decoding.inference import SORT_WINDOW, iter_log_probs
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.decoding.tuning import tune_decoder
from asr_pipeline.io.shards import list_shards, read_metadata
from asr_pipeline.text.tokenizer import CTCTokenizer

STARTUP = """
from pathlib import Path
from kedro.framework.project import pipelines
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
bootstrap_project(Path("."))
with KedroSession.create(project_path=Path("."), env="base") as session:
    session.load_context().catalog
    pipelines.set_requested(["evaluate"])  # as `kedro run --pipelines=evaluate`: only its modules are imported
    pipelines["evaluate"]
import asr_pipeline.pipelines.evaluate.nodes
"""
EVALUATIONS = (
    10  # dev, test, test_open and the six conditions (dvc.yaml evaluate's foreach), test's size or so
)


class Clock:
    """CPU and wall seconds per named part, summed over calls."""

    def __init__(self) -> None:
        self.parts: dict[str, list[float]] = {}

    @contextmanager
    def part(self, name: str):
        cpu, wall = time.process_time(), time.perf_counter()
        yield
        spent = self.parts.setdefault(name, [0.0, 0.0])
        spent[0] += time.process_time() - cpu
        spent[1] += time.perf_counter() - wall
        if not name.endswith("builds"):  # progress on stderr: a run takes minutes on a loaded machine
            print(f"  {name}: {spent[0]:.1f} CPU s so far", file=sys.stderr, flush=True)


def startup_seconds() -> tuple[float, float]:
    """CPU and wall seconds of a child process that does what a stage's `kedro run` does before its node."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"}
    subprocess.run([sys.executable, "-c", STARTUP], check=True, env=env, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return cpu, time.perf_counter() - wall


def padding(shards: list[str], batch_size: int, sort_window: int) -> tuple[int, int]:
    """(frames the model runs, padding included; real frames) for the batches ``iter_log_probs`` forms."""
    rows = [n for path in shards for n in read_metadata(path)["rows"].to_pylist()]
    padded = 0
    for start in range(0, len(rows), sort_window):
        window = sorted(rows[start : start + sort_window])
        padded += sum(
            max(window[i : i + batch_size]) * len(window[i : i + batch_size])
            for i in range(0, len(window), batch_size)
        )
    return padded, sum(rows)


def tune_and_evaluate(run, tokenizer, resources, settings, shards, sort_window: int, clock: Clock) -> dict:
    """The tune_decoding and evaluate@test stages' work with one batching, timed part by part."""
    with clock.part("forward dev"):
        dev = list(iter_log_probs(run.model, shards["dev"], settings.batch_size, sort_window=sort_window))
    tuned, chosen = {}, {}
    for name in settings.decoders:
        grid = settings.tune.get(name) or {}

        def build(options: DecodingOptions):
            with clock.part("tune: decoder builds"):
                return resources.build(options, tokenizer)

        with clock.part(f"tune: {name} grid"):
            result = tune_decoder(settings.base_options(name), grid, build, dev)
        tuned[name], chosen[name] = result.options, result.report()
    with clock.part("forward test"):
        test = list(iter_log_probs(run.model, shards["test"], settings.batch_size, sort_window=sort_window))
    decoders = {"greedy": greedy_decoder(run, tokenizer)}
    decoders.update({name: resources.build(options, tokenizer) for name, options in tuned.items()})
    with clock.part("evaluate test: decode"):
        hypotheses, metrics = decode_and_score(test, decoders)
    return {"chosen": chosen, "metrics": metrics, "hypotheses": hypotheses}


def compare(before: dict, after: dict) -> dict:
    """What differs between two batchings' results: the chosen values, the largest difference of a grid point's
    dev WER/CER and of a test metric (percentage points), and how many test hypotheses differ."""
    grid_delta = max(
        abs(a[key] - b[key])
        for name in before["chosen"]
        for a, b in zip(before["chosen"][name]["grid"], after["chosen"][name]["grid"], strict=True)
        for key in ("wer", "cer")
    )
    metric_delta = max(
        abs(before["metrics"][name][key] - after["metrics"][name][key])
        for name in before["metrics"]
        if isinstance(before["metrics"][name], dict)
        for key in ("wer", "cer")
    )
    rows = zip(before["hypotheses"].splitlines(), after["hypotheses"].splitlines(), strict=True)
    return {
        "chosen values equal": all(
            before["chosen"][name]["chosen"] == after["chosen"][name]["chosen"] for name in before["chosen"]
        ),
        "largest dev grid WER/CER difference": round(grid_delta, 3),
        "largest test metric difference": round(metric_delta, 3),
        "test hypotheses differing": sum(json.loads(a) != json.loads(b) for a, b in rows),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=Path("data/07_train/run"), help="a trained run")
    parser.add_argument("--data", type=Path, default=Path("data"), help="03_tokenizer, 04_features, 06_lm")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--startups", type=int, default=3, help="start-up processes timed (mean taken)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    needed = [args.run_dir / "checkpoint_latest.json", args.data / "04_features" / "dev", args.data / "06_lm"]
    if not all(path.exists() for path in needed):
        print(f"needs a trained run and the demo's shards, lexicon and LMs ({', '.join(map(str, needed))}): run "
              "`make demo` first, or pass --run-dir/--data")  # fmt: skip
        return 0

    settings = EvaluationParams.from_dict(yaml.safe_load(args.params.read_text())["decoding"])
    shards = {
        split: [str(p) for p in list_shards(args.data / "04_features" / split)] for split in ("dev", "test")
    }
    resources = DecodingResources(
        word_lm=args.data / "06_lm" / "lm.binary",
        token_lm=args.data / "06_lm" / "tokens_lm.binary",
        lexicon=args.data / "03_tokenizer" / "lexicon.txt",
    )
    startups = [startup_seconds() for _ in range(args.startups)]
    startup = [sum(s[i] for s in startups) / len(startups) for i in (0, 1)]
    clocks = {"shard order": Clock(), "by length": Clock()}
    with clocks["by length"].part("model load"):
        run = load_run(args.run_dir)
    tokenizer = CTCTokenizer(
        (args.data / "03_tokenizer" / "tokenizer.model").read_bytes(), blank_id=run.blank_id
    )
    # One batch first, so that neither batching pays the first forward's one-time set-up (oneDNN's kernels).
    next(iter_log_probs(run.model, shards["dev"], settings.batch_size))
    results = {}
    # A window of one batch is the batching in shard order (each batch holds the examples it held before sorting).
    for name, window in (("shard order", settings.batch_size), ("by length", SORT_WINDOW)):
        results[name] = tune_and_evaluate(run, tokenizer, resources, settings, shards, window, clocks[name])
    same = compare(results["shard order"], results["by length"])

    print(
        f"# {platform.node()}: {os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} "
        f"threads), Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}; run {args.run_dir}"
    )
    print("model load: {:.1f} CPU s, {:.1f} s wall".format(*clocks["by length"].parts.pop("model load")))
    print(
        f"start-up of one stage process: {startup[0]:.1f} CPU s, {startup[1]:.1f} s wall (mean of {len(startups)})"
    )
    for split in ("dev", "test"):
        for name, window in (("shard order", settings.batch_size), ("by length", SORT_WINDOW)):
            padded, real = padding(shards[split], settings.batch_size, window)
            print(
                f"{split} padding, {name}: {padded} frames run for {real} real ({100 * real / padded:.0f} % real)"
            )
    print("\n| part | shard order: CPU s / wall s | by length: CPU s / wall s |\n|---|---|---|")
    parts = list(dict.fromkeys([*clocks["by length"].parts, *clocks["shard order"].parts]))
    for part in parts:
        cells = [
            "{:.1f} / {:.1f}".format(*clocks[name].parts[part]) if part in clocks[name].parts else "-"
            for name in clocks
        ]
        print(f"| {part} | {' | '.join(cells)} |")
    print("\nestimated tune_decoding + evaluate (1 + 10 processes), CPU s:")
    totals = {}
    for name, clock in clocks.items():
        p = {part: spent[0] for part, spent in clock.parts.items()}
        tune = startup[0] + p["forward dev"] + sum(v for k, v in p.items() if k.startswith("tune:"))
        per_evaluation = startup[0] + p["forward test"] + p["evaluate test: decode"]
        totals[name] = {
            "tune": tune,
            "evaluations": EVALUATIONS * per_evaluation,
            "total": tune + EVALUATIONS * per_evaluation,
        }
        print(
            f"  {name}: tune {tune:.0f} + {EVALUATIONS} x {per_evaluation:.1f} = {totals[name]['total']:.0f}"
        )
    print(f"\nshard order against by length: {json.dumps(same)}")
    if args.json:
        figures = {
            "startup": startup,
            "parts": {name: clock.parts for name, clock in clocks.items()},
            "totals": totals,
            "same": same,
            "chosen": {name: r["chosen"] for name, r in results.items()},
            "metrics": {name: r["metrics"] for name, r in results.items()},
        }
        args.json.write_text(json.dumps(figures, indent=1))
    return 0 if same["chosen values equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
