"""``asr-pipeline kernel-bench``: every op module that exists is timed (the references on the CPU), the printed
table and the JSON agree, speed-ups and GB/s follow from the times, and a module not written yet is skipped
with a note while a broken one fails loudly. Tiny sizes: these check the bench, not the kernels' speed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import asr_kernels
from asr_kernels import _bench, _measure
from asr_pipeline.cli import main

PROJECT_ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = PROJECT_ROOT / "kernels" / "asr_kernels"
TINY = ["--batch", "2", "--seq-len", "16", "--channels", "8", "--heads", "2", "--iters", "2", "--warmup", "1"]


def kernel_bench(*flags: object) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(["kernel-bench", *map(str, flags)])
    return status, stdout.getvalue(), stderr.getvalue()


def table_rows(stdout: str) -> dict[tuple[str, str], list[str]]:
    """(op, pass) -> the row's cells after op and pass, split on the " | " group separators."""
    rows = {}
    for line in stdout.splitlines():
        groups = line.split(" | ")
        first = groups[0].split()
        if len(groups) == 6 and len(first) == 2 and first[1] in ("fwd", "fwd+bwd"):
            rows[first[0], first[1]] = groups[1:]
    return rows


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    """Every op, references eager only (compiling each op would take minutes here)."""
    path = tmp_path_factory.mktemp("kernel_bench") / "bench.json"
    status, stdout, _ = kernel_bench("--backend", "cpu", *TINY, "--no-compile", "--json", path)
    assert status == 0, stdout
    return stdout, json.loads(path.read_text())


def test_every_op_module_that_exists_is_timed_and_the_rest_are_named_as_skipped(cpu_run):
    stdout, report = cpu_run
    existing = [name for name in _bench.OP_MODULES if (KERNELS_DIR / f"{name}.py").is_file()]

    assert list(dict.fromkeys(row["module"] for row in report["results"])) == existing
    assert report["skipped_missing_modules"] == [n for n in _bench.OP_MODULES if n not in existing]
    for name in report["skipped_missing_modules"]:
        assert f"note: asr_kernels.{name} does not exist yet: skipped" in stdout


def test_a_module_with_several_cases_reports_each_of_them(cpu_run):
    _, report = cpu_run
    modules, _ = _measure.load_op_modules()
    for name, module in modules.items():
        if hasattr(module, "bench_cases"):
            cases = module.bench_cases(2, 16, 8, 2, torch.float32, "cpu")
            reported = {row["op"] for row in report["results"] if row["module"] == name}
            assert reported == {case.op for case in cases}, name


def test_cpu_runs_the_references_only_and_says_why(cpu_run):
    stdout, report = cpu_run
    assert "note: Triton kernels are GPU-only here" in stdout
    assert report["variants"] == ["eager"]
    for row in report["results"]:
        assert set(row["variants"]) == {"eager"}
        assert row["variants"]["eager"]["peak_mib"] is None  # not measured on the CPU
        assert row["speedup"] == {
            "compile_vs_eager": None,
            "triton_vs_eager": None,
            "triton_vs_compile": None,
        }


def test_the_table_shows_the_json_times_and_bandwidths(cpu_run):
    stdout, report = cpu_run
    rows = table_rows(stdout)
    assert len(rows) == len(report["results"])
    for row in report["results"]:
        eager = row["variants"]["eager"]
        assert eager["ms"] > 0
        assert eager["gb_per_s"] == pytest.approx(row["bytes"] / (eager["ms"] * 1e-3) / 1e9)
        assert eager["fraction_of_copy_bandwidth"] == pytest.approx(
            eager["gb_per_s"] / report["copy_gb_per_s"]
        )
        times, against_eager, against_compile, _, peaks = rows[row["op"], row["pass"]]
        assert times.split() == [f"{eager['ms']:.3f}", "-", "-"]
        assert against_eager.split() == ["-", "-"] and against_compile.split() == ["-"]
        assert peaks.split() == ["-", "-", "-"]


def test_an_op_with_a_backward_reports_forward_and_forward_backward(cpu_run):
    _, report = cpu_run
    passes = {(row["op"], row["pass"]) for row in report["results"]}
    assert ("glu", "fwd") in passes and ("glu", "fwd+bwd") in passes
    if "sequence_mask" in {op for op, _ in passes}:  # masks have no backward
        assert ("sequence_mask", "fwd+bwd") not in passes


def test_compiled_reference_speedup_is_the_ratio_of_the_times(tmp_path):
    path = tmp_path / "bench.json"
    status, stdout, _ = kernel_bench(
        "--backend", "cpu", *TINY, "--threads", "1", "--ops", "glu", "--json", path
    )
    report = json.loads(path.read_text())

    assert status == 0
    assert [(row["op"], row["pass"]) for row in report["results"]] == [("glu", "fwd"), ("glu", "fwd+bwd")]
    rows = table_rows(stdout)
    for row in report["results"]:
        eager, compiled = row["variants"]["eager"]["ms"], row["variants"]["compile"]["ms"]
        assert eager > 0 and compiled > 0
        assert row["speedup"]["compile_vs_eager"] == pytest.approx(eager / compiled)
        times, against_eager, *_ = rows["glu", row["pass"]]
        assert times.split() == [f"{eager:.3f}", f"{compiled:.3f}", "-"]
        assert against_eager.split()[0] == f"{eager / compiled:.2f}x"


def test_ops_selects_single_ops_and_rejects_unknown_names(cpu_run):
    status, stdout, _ = kernel_bench("--backend", "cpu", *TINY, "--no-compile", "--ops", "glu")
    assert status == 0 and {op for op, _ in table_rows(stdout)} == {"glu"}

    status, _, stderr = kernel_bench("--backend", "cpu", *TINY, "--no-compile", "--ops", "glu", "gelu")
    assert status == 2
    assert "unknown op gelu" in stderr and "glu" in stderr


def test_a_module_not_written_yet_is_skipped_with_a_note(monkeypatch):
    monkeypatch.setattr(_bench, "OP_MODULES", ("glu", "not_written_yet"))

    status, stdout, _ = kernel_bench("--backend", "cpu", *TINY, "--no-compile")

    assert status == 0
    assert "note: asr_kernels.not_written_yet does not exist yet: skipped" in stdout
    assert {op for op, _ in table_rows(stdout)} == {"glu"}


@pytest.fixture
def extra_op_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Writes ``asr_kernels.<name>`` into a temporary folder on the package's path."""
    monkeypatch.setattr(asr_kernels, "__path__", [*asr_kernels.__path__, str(tmp_path)])

    def write(name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.setattr(_bench, "OP_MODULES", ("glu", name))
        monkeypatch.delitem(sys.modules, f"asr_kernels.{name}", raising=False)

    return write


def test_an_import_error_inside_an_existing_module_is_not_taken_for_a_missing_module(extra_op_module):
    extra_op_module("broken_op", "import a_dependency_that_is_not_installed\n")

    with pytest.raises(ModuleNotFoundError, match="a_dependency_that_is_not_installed"):
        kernel_bench("--backend", "cpu", *TINY, "--no-compile")


def test_an_op_module_without_a_bench_case_is_an_error_naming_it(extra_op_module):
    extra_op_module("no_bench_op", "")

    status, _, stderr = kernel_bench("--backend", "cpu", *TINY, "--no-compile")

    assert status == 1
    assert "no_bench_op.py has neither bench_case" in stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible")
def test_backend_cuda_without_a_gpu_is_a_usage_error():
    status, _, stderr = kernel_bench("--backend", "cuda", *TINY)
    assert status == 2 and "no CUDA device" in stderr


def test_build_for_under_the_interpreter_is_a_usage_error_and_an_unknown_architecture_is_refused():
    # this session sets TRITON_INTERPRET: its kernels are the interpreter's (tests/kernels/test_build.py builds)
    status, stdout, stderr = kernel_bench("--build-for", "sm90", *TINY)
    assert status == 2 and "unset TRITON_INTERPRET" in stderr and not stdout

    status, _, stderr = kernel_bench("--build-for", "sm70")
    assert status == 2 and "invalid choice: 'sm70'" in stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_backend_times_the_triton_kernels_and_their_peak_memory(tmp_path):
    # A fresh process without the interpreter (conftest turns it on for CPU parity): compiled kernels only.
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    path = tmp_path / "bench.json"
    command = [sys.executable, "-m", "asr_pipeline.cli", "kernel-bench", "--backend", "cuda", *TINY[:-4]]
    command += ["--iters", "5", "--warmup", "2", "--json", str(path)]
    result = subprocess.run(command, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    report = json.loads(path.read_text())

    assert report["dtype"] == "bfloat16" and report["variants"] == ["eager", "compile", "triton"]
    for row in report["results"]:
        timings = {name: variant["ms"] for name, variant in row["variants"].items()}
        assert all(ms > 0 for ms in timings.values()), row
        assert all(variant["peak_mib"] is not None for variant in row["variants"].values()), row
        assert row["speedup"]["triton_vs_eager"] == pytest.approx(timings["eager"] / timings["triton"])
        assert row["speedup"]["triton_vs_compile"] == pytest.approx(timings["compile"] / timings["triton"])
