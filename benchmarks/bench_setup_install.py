"""How long set-up's install of the project takes with pip and with uv, side by side, each from an empty cache.

``.ci/setup.sh`` installs ``-e .[dev]`` into the venv: about 300 distributions, 6 GB, most of it torch and its
CUDA libraries, on every fresh machine (``make demo`` and CI). Each arm makes a new venv from the same Python in
a temporary folder with set-up's own steps (``.ci/venv_install.sh``): ``venv_new`` (pip and wheel upgraded), and in
the uv arm ``venv_get_uv``; then it installs the project with ``venv_install``, timed from its start to its end,
with a new, empty cache (``PIP_CACHE_DIR``, ``UV_CACHE_DIR``):
- ``pip``: the venv has no uv, so ``venv_install`` runs ``pip install -e .[dev]`` (pip compiles the bytecode as it
  installs);
- ``uv``: ``venv_install`` runs ``uv pip install --compile-bytecode -e .[dev]`` (the bytecode: these machines set
  PYTHONDONTWRITEBYTECODE, so Python would not cache it at import). Had uv failed and pip stood in, the arm stops.

Then each venv's ``import torch, kedro, polars, dvc.repo`` is timed (twice, the second counted: the bytecode is
there or it is not), and the versions the two tools chose are compared by name: a faster install of other
versions would not be the same set-up. The venvs are deleted after each arm (about 6 GB each).

    .venv/bin/python benchmarks/bench_setup_install.py                 # both arms, about 8 minutes on 2 cores
    .venv/bin/python benchmarks/bench_setup_install.py --arms uv --extras ""
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
VENV_INSTALL = ROOT / ".ci" / "venv_install.sh"
IMPORTS = "import torch, kedro, polars, dvc.repo"


def _base_python() -> str:
    """The Python the venvs are made from: this venv's own base interpreter, as set-up's find_python would pick."""
    return getattr(sys, "_base_executable", sys.executable)


def _setup_step(venv: Path, cache: Path, *step: str) -> subprocess.CompletedProcess[str]:
    """One of set-up's venv steps (``venv_new PYTHON``, ``venv_get_uv``, ``venv_install ARGS``) on ``venv``, with
    empty caches for both tools."""
    script = f'VENV="$1"; shift; source {VENV_INSTALL}; "$@"'
    env = {**os.environ, "PIP_CACHE_DIR": str(cache / "pip"), "UV_CACHE_DIR": str(cache / "uv")}
    return subprocess.run(
        ["bash", "-c", script, "setup_step", str(venv), *step],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )


def _versions(venv: Path) -> dict[str, str]:
    """Distribution name (PEP 503's normal form) -> version, read from the venv's own metadata."""
    script = "import importlib.metadata as m; print('\\n'.join(f'{d.name}=={d.version}' for d in m.distributions()))"
    listing = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, check=True
    )
    pairs = (line.split("==", 1) for line in listing.stdout.splitlines() if "==" in line)
    return {canonicalize_name(name): version for name, version in pairs}


def _size_gb(folder: Path) -> float:
    return (
        sum(path.lstat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())
        / 1e9
    )


def _check(tool: str, step: subprocess.CompletedProcess[str]) -> None:
    """Stop on a failed step, or where pip stood in for uv; the output only then (pip warns once per index
    location it cannot read)."""
    if step.returncode != 0 or "failed: pip installs" in step.stdout:
        sys.exit(
            f"bench_setup_install: {tool}: {step.args[3:]} failed:\n{step.stdout[-1000:]}{step.stderr[-3000:]}"
        )


def measure(tool: str, target: str, workdir: Path) -> dict:
    venv, cache = workdir / f"venv-{tool}", workdir / f"cache-{tool}"
    prepare = [("venv_new", _base_python())] + ([("venv_get_uv",)] if tool == "uv" else [])  # not timed
    for step in prepare:
        _check(tool, _setup_step(venv, cache, *step))
    if (venv / "bin" / "uv").exists() != (tool == "uv"):
        sys.exit(f"bench_setup_install: the {tool} arm's venv {'lacks' if tool == 'uv' else 'has'} uv")
    start = time.perf_counter()
    install = _setup_step(venv, cache, "venv_install", "-e", target)
    install_s = time.perf_counter() - start
    _check(tool, install)
    import_s = []
    for _ in range(2):
        start = time.perf_counter()
        subprocess.run([str(venv / "bin" / "python"), "-c", IMPORTS], check=True, cwd=workdir)
        import_s.append(time.perf_counter() - start)
    row = {"tool": tool, "install_s": install_s, "import_s": import_s[-1], "size_gb": _size_gb(venv)}
    row["versions"] = _versions(venv)
    shutil.rmtree(venv)
    shutil.rmtree(cache, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", nargs="+", choices=("pip", "uv"), default=["pip", "uv"])
    parser.add_argument("--extras", default="dev", help="the project's extras to install (set-up's: dev)")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="where the venvs go (default: a temporary folder)"
    )
    args = parser.parse_args(argv)
    target = f".[{args.extras}]" if args.extras else "."
    print(
        f"# {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}"
    )
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="bench_setup_") as tmp:
        rows = [measure(tool, target, Path(tmp)) for tool in args.arms]
    print(f"| tool | install -e {target} s | venv GB | distributions | `{IMPORTS}` s |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['tool']} | {row['install_s']:.1f} | {row['size_gb']:.2f} | {len(row['versions'])} "
            f"| {row['import_s']:.2f} |"
        )
    if len(rows) == 2:
        first, second = rows
        differ = sorted(
            f"{name}: {first['versions'].get(name)} vs {second['versions'].get(name)}"
            for name in first["versions"].keys() | second["versions"].keys()
            if first["versions"].get(name) != second["versions"].get(name)
            and name not in ("pip", "wheel", "uv")
        )
        print(
            f"\n{first['tool']} / {second['tool']} install time: {first['install_s'] / second['install_s']:.2f}x"
        )
        print("same versions" if not differ else f"{len(differ)} distributions differ: " + "; ".join(differ))


if __name__ == "__main__":
    main()
