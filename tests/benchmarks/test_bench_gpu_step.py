"""benchmarks/bench_gpu_step.py (issue 36) on the CPU: ``--smoke`` runs an arm end to end on the tiny
Zipformer (bucketed batches, their shapes, the timing row, the profile table), and the largest-batch
search finds the edge of what fits."""

from __future__ import annotations

import json
import os

import pytest

from .conftest import imported_script


@pytest.fixture
def bench(monkeypatch):
    # The script drops TRITON_INTERPRET when imported (it times compiled GPU kernels): monkeypatch gives the value
    # back afterwards, or every later kernel test of the session finds no way to run Triton on the CPU.
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "1"))
    yield from imported_script(monkeypatch, "bench_gpu_step")


def test_the_smoke_run_times_a_bucketed_arm_and_writes_its_profile(bench, tmp_path):
    arm = "eager:off:f32:buckets"
    out = tmp_path / "rows.json"
    bench.main(
        [
            "--smoke",
            "--arms",
            arm,
            "--profile",
            arm,
            "--profile-out",
            str(tmp_path / "p.txt"),
            "--json",
            str(out),
        ]
    )

    (row,) = json.loads(out.read_text())["rows"]
    assert row["arm"] == arm and row["model"] == "zipformer:tiny"
    # smoke: 2 batches whose longest utterances are 80 and 160 frames; 2 buckets ending at 160: 160 / 1.25
    assert [t for _, t in row["padded_frames"]] == [128, 160]
    assert row["audio_sec_per_sec"] > 0 and row["step_ms_median"] > 0
    assert row["back_to_back_audio_sec_per_sec"] > 0
    assert row["gflop_per_audio_sec"] > 0
    assert row["compiles"] == 0 and row["timed_recompiles"] == 0  # eager: dynamo never ran
    assert "aten::" in (tmp_path / "p.txt").read_text()


def test_an_arm_names_mode_kernels_precision_and_shapes(bench):
    assert bench.parse_arm("compile:off:bf16:buckets") == ("compile", "off", "bf16", "buckets")
    assert bench.parse_arm("eager:relative_shift:bf16:exact")[1] == "relative_shift"  # that kernel alone
    assert bench.parse_arm("layers:auto:f32:buckets")[1] == "auto"
    for wrong in ("compile:bf16", "eager:swish:bf16:exact"):
        with pytest.raises(Exception, match="MODE:KERNELS:PRECISION:SHAPES"):
            bench.parse_arm(wrong)
    with pytest.raises(Exception, match="'swish' is none of on, off, auto, glu, swoosh_l"):
        bench.parse_arm("eager:swish:bf16:exact")


def test_model_options_are_trains_and_a_malformed_one_is_an_argparse_error(bench, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    bench.add_model_option_flag(parser)
    args = parser.parse_args(
        ["--model-option", "relative_key_attention=flex", "--model-option", "num_heads=2"]
    )
    assert dict(args.model_option) == {"relative_key_attention": "flex", "num_heads": 2}  # JSON values
    with pytest.raises(SystemExit):
        parser.parse_args(["--model-option", "num_heads"])
    assert "expected NAME=VALUE" in capsys.readouterr().err


def test_per_op_times_the_arm_once_per_op_beside_its_reference(bench):
    from asr_kernels import OPS

    defaults = {"modes": ["eager"], "kernels": ["off", "on"], "precisions": ["f32"], "shapes": ["exact"]}
    args = bench.argparse.Namespace(
        arms=[("eager", "on", "bf16", "buckets")], per_op=("eager", "auto", "bf16", "buckets"), **defaults
    )
    arms = bench.arms_to_time(args, cuda=True)
    assert arms[:2] == [("eager", "on", "bf16", "buckets"), ("eager", "off", "bf16", "buckets")]
    assert [arm[1] for arm in arms[2:]] == list(OPS)
    assert bench.arms_to_time(args, cuda=False) == [("eager", "off", "bf16", "buckets")]
    args.arms = None  # --per-op alone: its arms only, not every combination of the defaults
    assert [arm[1] for arm in bench.arms_to_time(args, cuda=True)] == ["off", *OPS]
    args.per_op = None
    assert bench.arms_to_time(args, cuda=True) == [
        ("eager", "off", "f32", "exact"),
        ("eager", "on", "f32", "exact"),
    ]


def test_the_verdicts_compare_each_kernel_arm_with_the_reference_of_its_model_mode_and_precision(bench):
    def row(arm: str, ms: float, model: str = "zipformer:m") -> dict:
        return {"model": model, "arm": arm, "step_ms_median": ms}

    rows = [
        row("eager:off:bf16:buckets", 300.0),
        row("eager:relative_shift:bf16:buckets", 250.0),
        row("eager:glu:bf16:buckets", 330.0),
        row("eager:on:bf16:buckets", 360.0),
        row("eager:on:f32:buckets", 200.0),  # no f32 reference: no verdict
        row("eager:glu:bf16:buckets", 100.0, model="squeezeformer:m"),  # another model's: none either
    ]
    verdicts = {v["arm"]: v for v in bench.kernel_verdicts(rows)}

    assert set(verdicts) == {
        "eager:relative_shift:bf16:buckets",
        "eager:glu:bf16:buckets",
        "eager:on:bf16:buckets",
    }
    assert verdicts["eager:relative_shift:bf16:buckets"]["speedup"] == pytest.approx(1.2)
    assert verdicts["eager:relative_shift:bf16:buckets"]["auto_today"] == "kernel"
    assert verdicts["eager:glu:bf16:buckets"]["speedup"] == pytest.approx(300 / 330)
    assert verdicts["eager:glu:bf16:buckets"]["auto_today"] == "reference"
    assert verdicts["eager:on:bf16:buckets"]["auto_today"] == ""


@pytest.mark.parametrize(("edge", "found"), [(1000, 1000), (1, 0), (100, 100), (5000, 4096)])
def test_the_largest_batch_search_doubles_then_bisects_to_the_edge(bench, edge, found):
    tried = []

    def fits(size: int) -> bool:
        tried.append(size)
        return size <= edge

    # From 100 up to a limit of 4096: doubling finds 800 fits and 1600 does not, then bisection closes in
    # (4 halvings of the 800-wide gap: within 50); 5000 fits everything up to the limit.
    result = bench.largest_fitting(fits, start=100, limit=4096, bisections=10)
    assert result == found
    assert len(tried) < 20


def test_the_engine_figures_come_from_the_runs_compile_and_later_train_events(bench, tmp_path):
    from asr_pipeline.training.events import EventLog

    log = EventLog(tmp_path / "events.jsonl", enabled=True, append=False)
    batching = {"time_buckets": [800, 1024], "epoch0": {"padding_fraction": 0.12}}
    log.write("kernels", 0, 0, {"choice": "auto", "eager": ["relative_shift"], "compiled": []})
    log.write("data", 0, 0, {"batching": batching})
    log.write("compile", 1, 0, {"first_step_sec": 95.0, "compiles": 1, "recompiles": 0, "graph_breaks": 0})
    for step, epoch, rate, wait in [
        (5, 0, 900.0, 0.5),
        (10, 0, 5000.0, 0.4),
        (15, 1, 7000.0, 0.1),
        (20, 1, 7400.0, 0.0),
        (25, 1, 7200.0, 0.3),
    ]:
        log.write("train", step, epoch, {"audio_seconds_per_sec": rate, "loader_wait_fraction": wait})
    log.write("compile", 25, 1, {"first_step_sec": 95.0, "compiles": 2, "recompiles": 1, "graph_breaks": 0})
    log.close()

    figures = bench.engine_throughput(str(tmp_path))

    assert figures["first_step_sec"] == 95.0
    assert (figures["compiles"], figures["recompiles"], figures["graph_breaks"]) == (2, 1, 0)
    assert figures["steady_audio_sec_per_sec"] == 7200.0  # the median of epoch 2's windows, compiles done
    assert figures["steady_loader_wait_fraction"] == 0.1
    assert figures["time_buckets"] == [800, 1024] and figures["padding_fraction"] == 0.12
    assert figures["kernels"]["eager"] == ["relative_shift"]
