"""benchmarks/gpu_image/sitecustomize.py: the GPU script's rehearsal finds nothing that the GPU machine's image
lacks, and the modules the script's steps start from import under it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from .conftest import BENCHMARKS

ROOT = BENCHMARKS.parent
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
    environment = {key: value for key, value in os.environ.items() if key != "ASR_GPU_IMAGE_ABSENT"}
    paths = (IMAGE_SITE, ROOT / "src", ROOT / "kernels", BENCHMARKS, ROOT)
    environment["PYTHONPATH"] = os.pathsep.join(str(path) for path in paths)
    return subprocess.run(
        [sys.executable, "-c", code], env=environment, cwd=ROOT, capture_output=True, text=True
    )


def test_what_the_image_lacks_is_not_found_in_any_process_and_the_rest_imports(image):
    code = """
import importlib.util, os, subprocess, sys
import torch, numpy, pyarrow, kenlm, soundfile  # the image's own, and what the script carries there
for name in ("kedro", "polars", "dvc.repo"):
    try:
        __import__(name)
    except ModuleNotFoundError as error:
        print("refused:", error)
print("find_spec:", importlib.util.find_spec("polars"), importlib.util.find_spec("torch") is not None)
child = subprocess.run([sys.executable, "-c", "import polars"], capture_output=True, text=True)
print("child:", child.stderr.strip().splitlines()[-1])
prefix, _, listed = os.environ["ASR_GPU_IMAGE_ABSENT"].rpartition(":")
import sitecustomize  # this process's own: what it lists here, where this process looks for packages
print("listed:", prefix == sys.prefix, sorted(listed.split(",")) == sorted(sitecustomize.absent_modules()))
# A process started with the list takes it as it is (wave: a module no distribution gives), not anew
os.environ["ASR_GPU_IMAGE_ABSENT"] = sys.prefix + ":wave"
taken = subprocess.run([sys.executable, "-c", "import wave"], capture_output=True, text=True)
print("taken:", taken.stderr.strip().splitlines()[-1])
os.environ["ASR_GPU_IMAGE_ABSENT"] = "/another/venv:wave"
other = subprocess.run(
    [sys.executable, "-c", "import wave; print('wave'); import polars"], capture_output=True, text=True
)
print("another venv's:", other.stdout.strip(), other.stderr.strip().splitlines()[-1])
"""
    result = _under_the_image(code)

    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[:3] == [f"refused: No module named {name!r}" for name in ("kedro", "polars", "dvc")]
    assert lines[3] == "find_spec: None True", "an optional package's check takes the image's branch"
    assert lines[4] == "child: ModuleNotFoundError: No module named 'polars'"
    assert lines[5] == "listed: True True" and len(image.absent_modules()) > 100
    assert lines[6] == "taken: ModuleNotFoundError: No module named 'wave'"
    assert lines[7] == "another venv's: wave ModuleNotFoundError: No module named 'polars'", "listed anew"


def test_the_modules_the_gpu_script_starts_from_import_under_the_image():
    commands = "\n".join(
        line for line in SCRIPT.read_text().splitlines() if not line.lstrip().startswith("#")
    )
    modules = set(re.findall(r"benchmarks/(\w+)\.py", commands))
    modules |= set(re.findall(r"-m (asr_pipeline[\w.]*)", commands))
    # `cli train`'s module and the worker torchrun starts
    modules |= {"asr_pipeline.cli.train", "asr_pipeline.training.worker"}
    for path in re.findall(r"-m pytest (tests/[\w/.]+)", commands):  # a test file, or a folder of them
        target = ROOT / path
        files = sorted(target.glob("test_*.py")) if target.is_dir() else [target]
        folder = target if target.is_dir() else target.parent
        files += [
            parent / "conftest.py"
            for parent in (folder, *folder.parents)
            if (parent / "conftest.py").is_file()
        ]
        modules |= {
            ".".join(f.relative_to(ROOT).with_suffix("").parts) for f in files if f.is_relative_to(ROOT)
        }
    assert {
        "bench_gpu_step",
        "asr_pipeline.cli",
        "tests.training.test_trainer_step",
        "tests.conftest",
    } <= modules
    assert any(m.startswith("tests.kernels.test_") for m in modules)

    code = f"""
import importlib, sys
assert any(finder.__name__ == "_ImagePathFinder" for finder in sys.meta_path if isinstance(finder, type))
for module in {sorted(modules)!r}:
    importlib.import_module(module)
"""
    result = _under_the_image(code)

    assert result.returncode == 0, result.stderr[-3000:]


def test_prepare_packs_every_module_of_the_carried_distributions(image):
    paths = image.carried_paths()
    carried = {image._normalized(name) for name in image.CARRIED}
    provided = {
        module
        for module, distributions in importlib.metadata.packages_distributions().items()
        if any(image._normalized(d) in carried for d in distributions)
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
    # flashlight's bundled shared libraries
    assert any(path.startswith("flashlight_text") and path.endswith(".libs") for path in paths), paths


def test_a_carried_distribution_this_python_lacks_and_an_unknown_argument_stop_with_one_line(
    image, monkeypatch
):
    monkeypatch.setattr(image, "CARRIED", ("no-such-distribution",))
    with pytest.raises(
        SystemExit, match=r"^no-such-distribution is not installed in this Python .*make setup$"
    ):
        image.carried_paths()

    result = subprocess.run(
        [sys.executable, str(IMAGE_SITE / "sitecustomize.py"), "--carry"], capture_output=True, text=True
    )

    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"usage: python {IMAGE_SITE / 'sitecustomize.py'} [--carried]; got --carry"
    ]
