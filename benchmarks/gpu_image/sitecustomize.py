"""The lent GPU machine's Python, as the GPU script's rehearsal sees it: a package that this project's venv
has and the machine's CUDA image lacks cannot be found, as it cannot be there.

With this folder on PYTHONPATH, Python imports this module at start-up (``site``'s ``sitecustomize`` hook) in
every process that inherits the variable (one started with ``-S``, ``-E`` or ``-I``, or with a cleared
environment, escapes it), torchrun's ranks and the loader's workers included. ``REHEARSE=1 bash
benchmarks/gpu_issue36.sh`` puts it there, so a step that needs Kedro, polars, DVC... fails in the rehearsal
on the CPU, not in the 15 minutes of device time (``tests/benchmarks/test_gpu_image.py`` imports the modules
the steps start from under it on every ``make test``). An absent module is not found at all, as there:
``import`` raises Python's own ``ModuleNotFoundError`` and ``importlib.util.find_spec`` returns None, so code
that checks for an optional package takes the same branch as on the image.

``IMAGE_PACKAGES``: the image's distributions as the device notes list them (read on 2026-11-17; a package
missing from this list makes the rehearsal stricter, never laxer). ``CARRIED``: what ``gpu_issue36.sh
prepare`` packs into ``.gpu/issue36_site.tar.xz`` for it. Only presence is rehearsed, and by top-level
module: the image's versions are its own, so a package of the image can still be refused here when this
venv's version of it needs one the image lacks (this venv's transformers, through huggingface-hub 2.4's
httpx2; no step imports it), and a distribution absent from the image that shares a top-level namespace with
one it has would pass (none does in this venv).
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import os
import re
import sys

IMAGE_PACKAGES = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile
nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink
nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx
optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks
pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn
scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers
treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt
xarray xxhash yarl zipp
""".split()  # noqa: SIM905 (the device notes' list as it reads)
CARRIED = ("kenlm", "flashlight-text", "soundfile", "cffi", "pycparser")
OURS = ("asr-pipeline",)  # the project itself: its src/ and kernels/ are on PYTHONPATH there
# "<sys.prefix>:<the absent modules, comma-separated>" once a process has listed them: reading every installed
# distribution's metadata takes ~2 s, which the processes it starts (ranks, loader workers) then skip. Another
# environment's list (another prefix) is not taken.
ABSENT_ENV = "ASR_GPU_IMAGE_ABSENT"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_THERE = frozenset(_normalized(name) for name in (*IMAGE_PACKAGES, *CARRIED, *OURS))


def _there(distribution: str) -> bool:
    return _normalized(distribution) in _THERE


def absent_modules() -> frozenset[str]:
    """The top-level modules this Python could import that only distributions absent from the image give."""
    return frozenset(
        module
        for module, distributions in importlib.metadata.packages_distributions().items()
        if not any(_there(d) for d in distributions)
    )


def _listed(absent: frozenset[str]) -> str:
    """``ABSENT_ENV``'s value for this Python: its prefix, then the modules."""
    return f"{sys.prefix}:{','.join(sorted(absent))}"


_absent: frozenset[str] | None = None


def _absent_now() -> frozenset[str]:
    """The absent modules, listed at this process's first import (start-up stays quick, and no thread of its
    own runs yet): from ``ABSENT_ENV`` when this environment's parent listed them, else read and exported to
    the processes this one starts. The imports the listing makes itself pass; if it fails, that import fails
    with its error and the next one lists again."""
    global _absent
    if _absent is None:
        _absent = frozenset()  # while listing: its own imports pass
        prefix, _, listed = os.environ.get(ABSENT_ENV, "").rpartition(":")  # no module name has a colon
        try:
            absent = frozenset(listed.split(",")) if prefix == sys.prefix and listed else absent_modules()
        except BaseException:
            _absent = None
            raise
        _absent = absent
        os.environ[ABSENT_ENV] = _listed(absent)
    return _absent


class _ImagePathFinder(importlib.machinery.PathFinder):
    """Python's finder of modules on sys.path, which finds no absent module (its ``find_spec``: None)."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in _absent_now():
            return None
        return super().find_spec(fullname, path, target)


def install() -> None:
    """Put ``_ImagePathFinder`` in the place of Python's own in ``sys.meta_path`` (once)."""
    sys.meta_path[:] = [
        _ImagePathFinder if finder is importlib.machinery.PathFinder else finder for finder in sys.meta_path
    ]


def carried_paths() -> list[str]:
    """What ``prepare`` packs: the top-level files and folders of the ``CARRIED`` distributions' installed
    files (their modules, their extension libraries and their metadata), relative to site-packages."""
    paths = set()
    for name in CARRIED:
        try:
            files = importlib.metadata.distribution(name).files
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(
                f"{name} is not installed in this Python ({sys.prefix}): run make setup"
            ) from None
        if not files:
            raise SystemExit(f"{name}: its installed files are not recorded (no RECORD): nothing to pack")
        # A script installed into bin/ ("..") is not carried, nor a top-level module's __pycache__.
        paths.update(top for top in (file.parts[0] for file in files) if top not in ("..", "__pycache__"))
    return sorted(paths)


# At start-up, from PYTHONPATH (imported under another name, as the tests do, it changes nothing); run as a
# script, for gpu_issue36.sh: ABSENT_ENV's value, or with --carried what prepare packs.
if __name__ == "sitecustomize":
    install()
elif __name__ == "__main__":
    if sys.argv[1:] not in ([], ["--carried"]):
        raise SystemExit(f"usage: python {sys.argv[0]} [--carried]; got {' '.join(sys.argv[1:])}")
    print(" ".join(carried_paths()) if sys.argv[1:] else _listed(absent_modules()))
