"""The lent GPU machine's Python, as the GPU script's rehearsal sees it: a package that this project's venv
has and the machine's CUDA image lacks cannot be imported, as it cannot be there.

With this folder on PYTHONPATH, Python runs this module at start-up (``site``'s ``sitecustomize`` hook) in
every process, torchrun's ranks and the loader's workers included. ``REHEARSE=1 bash
benchmarks/gpu_issue36.sh`` puts it there, so a step that needs Kedro, polars, DVC... fails in the
rehearsal on the CPU, not in the 15 minutes of device time (``tests/benchmarks/test_gpu_image.py`` checks
the modules the steps start from on every ``make test``).

``IMAGE_PACKAGES``: the image's distributions as the device notes list them (read on 2026-11-17; a
package missing from this list makes the rehearsal stricter, never laxer). ``CARRIED``: what
``gpu_issue36.sh prepare`` packs into ``.gpu/issue36_site.tar.xz`` for it. Only presence is rehearsed: the
image's versions (numpy 2.5, transformers 5.17, ...) are its own.
"""

from __future__ import annotations

import importlib.abc
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
nvidia-ml-py onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx
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
IMAGE_PREFIXES = ("nvidia-",)  # CUDA's libraries, named by CUDA version (nvidia-cudnn-cu13, ...)
CARRIED = ("kenlm", "flashlight-text", "soundfile", "cffi", "pycparser")
OURS = ("asr-pipeline",)  # the project itself: its src/ and kernels/ are on PYTHONPATH there
# The absent modules, comma-separated, once a process has listed them: reading every installed distribution's
# metadata takes ~2 s, which the processes it starts (ranks, loader workers) then skip.
ABSENT_ENV = "ASR_GPU_IMAGE_ABSENT"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_THERE = frozenset(_normalized(name) for name in (*IMAGE_PACKAGES, *CARRIED, *OURS))


def _there(distribution: str) -> bool:
    name = _normalized(distribution)
    return name in _THERE or name.startswith(IMAGE_PREFIXES)


def absent_modules() -> frozenset[str]:
    """The top-level modules this Python could import that only distributions absent from the image give."""
    return frozenset(
        module
        for module, distributions in importlib.metadata.packages_distributions().items()
        if not any(_there(d) for d in distributions)
    )


class _ImageFinder(importlib.abc.MetaPathFinder):
    """Refuses the absent modules' imports before any other finder looks (a ModuleNotFoundError, which code
    that takes a missing optional package in its stride catches as usual)."""

    def __init__(self) -> None:
        self.absent: frozenset[str] | None = None  # read on the first import: start-up stays quick

    def find_spec(self, name: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if self.absent is None:
            self.absent = frozenset()  # packages_distributions() imports too: let those through meanwhile
            listed = os.environ.get(ABSENT_ENV)
            self.absent = frozenset(listed.split(",")) if listed else absent_modules()
            os.environ[ABSENT_ENV] = ",".join(sorted(self.absent))
        top = name.partition(".")[0]
        if top in self.absent:
            raise ModuleNotFoundError(
                f"No module named {name!r} (the GPU machine's image lacks it)", name=name
            )
        return None


def install() -> None:
    if not any(isinstance(finder, _ImageFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _ImageFinder())


def carried_paths() -> list[str]:
    """What ``prepare`` packs: the top-level files and folders of the ``CARRIED`` distributions' installed
    files (their modules, their extension libraries and their metadata), relative to site-packages."""
    paths = set()
    for name in CARRIED:
        for file in importlib.metadata.distribution(name).files or ():
            top = file.parts[0]
            if top != ".." and not top.startswith(
                "__pycache__"
            ):  # a script installed into bin/ is not carried
                paths.add(top)
    return sorted(paths)


if (
    __name__ == "sitecustomize"
):  # at start-up, from PYTHONPATH (imported under another name, it changes nothing)
    install()
elif (
    __name__ == "__main__"
):  # for gpu_issue36.sh: the absent modules (comma-separated), or what prepare packs
    print(" ".join(carried_paths()) if sys.argv[1:] == ["--carried"] else ",".join(sorted(absent_modules())))
