"""benchmarks/gpu_image/sitecustomize.py: the GPU script's rehearsal refuses what the GPU machine's image lacks,
and the modules the script's steps start from import under it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from .conftest import BENCHMARKS

IMAGE_SITE = BENCHMARKS / "gpu_image"
SCRIPT = BENCHMARKS / "gpu_issue36.sh"


@pytest.fixture(scope="module")
def image():
    """The module itself, imported under another name: it installs nothing into this process."""
    spec = importlib.util.spec_from_file_location("gpu_image", IMAGE_SITE / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _under_the_image(code: str) -> subprocess.CompletedProcess:
    root = BENCHMARKS.parent
    env = {key: value for key, value in os.environ.items() if key != "ASR_GPU_IMAGE_ABSENT"}
    env["PYTHONPATH"] = os.pathsep.join(
        str(p) for p in (IMAGE_SITE, root / "src", root / "kernels", BENCHMARKS, root)
    )
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True)


def test_what_the_image_lacks_is_refused_in_every_process_and_the_rest_imports(image):
    code = """
import os, subprocess, sys
import torch, numpy, pyarrow, kenlm, soundfile  # the image's own, and what the script carries there
for name in ("kedro", "polars", "dvc.repo"):
    try:
        __import__(name)
    except ModuleNotFoundError as error:
        print("refused:", error)
child = subprocess.run([sys.executable, "-c", "import polars"], capture_output=True, text=True)
print("child:", child.stderr.strip().splitlines()[-1])
print("listed once:", len(os.environ["ASR_GPU_IMAGE_ABSENT"].split(",")))
"""
    result = _under_the_image(code)

    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        f"refused: No module named {name!r} (the GPU machine's image lacks it)"
        for name in ("kedro", "polars", "dvc")
    ]
    assert (
        lines[3] == "child: ModuleNotFoundError: No module named 'polars' (the GPU machine's image lacks it)"
    )
    assert int(lines[4].split()[-1]) == len(image.absent_modules()) > 0


def test_the_modules_the_gpu_script_starts_from_import_under_the_image():
    commands = "\n".join(
        line for line in SCRIPT.read_text().splitlines() if not line.lstrip().startswith("#")
    )
    modules = set(re.findall(r"benchmarks/(\w+)\.py", commands))
    modules |= set(re.findall(r"-m (asr_pipeline[\w.]*)", commands))
    modules |= {
        "asr_pipeline.cli.train",
        "asr_pipeline.training.worker",
    }  # `cli train` and what torchrun starts
    for path in re.findall(r"-m pytest (tests/[\w/.]+)", commands):  # a test file, or a folder of them
        target = BENCHMARKS.parent / path
        files = sorted(target.glob("test_*.py")) if target.is_dir() else [target]
        modules |= {".".join(f.relative_to(BENCHMARKS.parent).with_suffix("").parts) for f in files}
    assert {"bench_gpu_step", "asr_pipeline.cli", "tests.training.test_trainer_step"} <= modules
    assert any(m.startswith("tests.kernels.") for m in modules)

    result = _under_the_image(f"import importlib\nfor m in {sorted(modules)!r}: importlib.import_module(m)")

    assert result.returncode == 0, result.stderr[-3000:]


def test_prepare_packs_every_module_of_the_carried_distributions(image):
    paths = image.carried_paths()
    provided = {
        module
        for module, distributions in importlib.metadata.packages_distributions().items()
        if any(image._normalized(d) in {image._normalized(c) for c in image.CARRIED} for d in distributions)
    }
    assert {
        "kenlm",
        "flashlight",
        "soundfile",
        "_soundfile",
        "cffi",
        "_cffi_backend",
        "pycparser",
    } <= provided
    for module in provided:
        assert any(path == module or path.startswith(f"{module}.") for path in paths), module
    assert any(path.startswith("flashlight_text") and path.endswith(".libs") for path in paths), (
        paths
    )  # its .so's
