"""``asr_kernels._build``: every kernel the ops launch, compiled for an H100/H200 (sm90) here, on a machine
without a GPU, with what each costs a thread (``asr-pipeline kernel-bench --build-for``).

The builds run in a fresh interpreter without ``TRITON_INTERPRET``: this test session sets it before
``asr_kernels`` is imported, and kernels decorated under it are interpreted functions, which do not compile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asr_kernels import _dispatch
from asr_kernels._build import access_bits, build_cases

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The sizes scale the bench cases' tensors, not the kernels' tiles much: small ones keep the CPU side quick.
SMALL = ["--batch", "2", "--seq-len", "64", "--channels", "256", "--heads", "2"]


def run_without_interpreter(*command: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=600
    )


@pytest.fixture(scope="module")
def sm90_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    path = tmp_path_factory.mktemp("build") / "sm90.json"
    done = run_without_interpreter(
        "-m", "asr_pipeline.cli", "kernel-bench", "--build-for", "sm90", *SMALL, "--json", str(path)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(path.read_text())


def test_every_op_launches_kernels_that_compile_for_sm90_without_spilling(sm90_builds):
    _, report = sm90_builds
    kernels = report["kernels"]

    assert report["architecture"] == "sm90" and report["dtype"] == "bfloat16"
    assert {kernel["op"] for kernel in kernels} == set(_dispatch.OPS)
    for kernel in kernels:
        assert kernel["error"] is None, kernel
        assert 0 < kernel["registers"] <= 255, kernel
        assert kernel["spill_bytes"] == 0, kernel
        assert kernel["load_bits"] and kernel["store_bits"], kernel
        assert kernel["meta"]["num_warps"] == 4
    # the ops with a gradient build their backward kernel too
    by_op = {op: {k["kernel"] for k in kernels if k["op"] == op} for op in _dispatch.OPS}
    for op in ("glu", "swoosh_l", "residual_add_mask_time", "relative_shift", "pairwise_downsample"):
        assert any("backward" in name for name in by_op[op]), by_op[op]


def test_the_table_shows_each_kernels_costs_as_the_json_has_them(sm90_builds):
    stdout, report = sm90_builds
    rows = [
        line.split() for line in stdout.splitlines() if line.split()[:1] and line.split()[0] in _dispatch.OPS
    ]

    assert len(rows) == len(report["kernels"])
    for cells, kernel in zip(rows, report["kernels"], strict=True):
        assert cells[:5] == [
            kernel["op"],
            kernel["kernel"],
            str(kernel["registers"]),
            str(kernel["spill_bytes"]),
            str(kernel["shared_bytes"]),
        ]
        assert cells[5:7] == [
            ",".join(map(str, kernel["load_bits"])),
            ",".join(map(str, kernel["store_bits"])),
        ]
        assert f"num_warps={kernel['meta']['num_warps']}" in cells[7:]


def test_a_kernel_the_compiler_rejects_is_reported_with_its_op_and_the_others_still_build(tmp_path):
    # Triton's interpreter runs the list comprehension as Python; its compiler has no such construct. Triton
    # reads a kernel's source from its file, so the script is one.
    script = textwrap.dedent(
        """
        import json, torch, triton, triton.language as tl
        from asr_kernels._bench import BenchCase
        from asr_kernels._build import build_cases
        from asr_kernels._measure import NamedCase

        @triton.jit
        def bad(x_ptr, BLOCK: tl.constexpr):
            shift = sum([i for i in range(2)])
            tl.store(x_ptr + tl.arange(0, BLOCK) + shift, 1.0)

        @triton.jit
        def good(x_ptr, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

        def launch(kernel):
            def call(x):
                kernel[(1,)](x, BLOCK=16)
                return x
            return call

        x = torch.zeros(18)
        cases = [
            NamedCase(op, "test", BenchCase(op, lambda x: x, launch(kernel), (x,), 0, 0))
            for op, kernel in (("bad_op", bad), ("good_op", good))
        ]
        cases.append(NamedCase("quiet_op", "test", BenchCase("quiet_op", lambda x: x, lambda x: x, (x,), 0, 0)))
        print(json.dumps([[b.op, b.kernel, b.error, b.registers] for b in build_cases(cases, 90)]))
        """
    )
    (tmp_path / "kernels.py").write_text(script)
    done = run_without_interpreter(str(tmp_path / "kernels.py"))
    assert done.returncode == 0, done.stderr
    bad, good, quiet = json.loads(done.stdout)

    assert bad[:2] == ["bad_op", "bad"] and bad[2].startswith("CompilationError")
    assert good == ["good_op", "good", None, good[3]] and good[3] > 0
    # a case that launches nothing is a failure too, not a silent gap in the table
    assert quiet[0] == "quiet_op" and quiet[2].startswith("no Triton launch to build")


def test_building_refuses_kernels_made_for_the_interpreter():
    assert _dispatch.interpreter_enabled()  # this session's, as for every kernel test
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET is set"):
        build_cases([], 90)


def test_access_widths_are_read_from_vector_and_scalar_global_accesses():
    ptx = """
        @%p1 ld.global.L1::evict_last.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
        ld.global.b16 { %rs1 }, [ %rd2 + 0 ];
        ld.shared.v4.b32 { %r5, %r6, %r7, %r8 }, [ %r9 + 0 ];
        @%p2 st.global.v2.b32 [ %rd3 + 0 ], { %r1, %r2 };
        st.global.b16 [ %rd4 + 0 ], { %rs1 };
    """
    assert access_bits(ptx) == {"ld": (16, 128), "st": (16, 64)}
    assert access_bits("ret;") == {"ld": (), "st": ()}
