"""Set-up's install step (``.ci/venv_install.sh``): uv installs where the venv has it, pip where it has not or
where uv fails, and the arguments reach either unchanged. uv and pip are stand-ins that record their arguments
and exit with a given status."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import PROJECT_ROOT

VENV_INSTALL = PROJECT_ROOT / ".ci" / "venv_install.sh"


def fake_tool(path: Path, log: Path, status: int) -> None:
    path.write_text(f'#!/usr/bin/env bash\necho "$(basename "$0") $*" >> {log}\nexit {status}\n')
    path.chmod(0o755)


def venv_install(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = f'set -euo pipefail; VENV={venv}; source {VENV_INSTALL}; venv_install "$@"'
    return subprocess.run(["bash", "-c", script, "venv_install", *args], capture_output=True, text=True)


def make_venv(tmp_path: Path, uv_status: int | None, pip_status: int = 0) -> tuple[Path, Path]:
    """A venv folder whose bin/ has a pip, and a uv unless ``uv_status`` is None; the log of their calls."""
    venv, log = tmp_path / "venv", tmp_path / "calls.log"
    (venv / "bin").mkdir(parents=True)
    fake_tool(venv / "bin" / "pip", log, pip_status)
    if uv_status is not None:
        fake_tool(venv / "bin" / "uv", log, uv_status)
    return venv, log


def test_uv_installs_with_bytecode_into_the_venv_and_pip_is_not_called(tmp_path):
    venv, log = make_venv(tmp_path, uv_status=0)
    result = venv_install(venv, "-e", ".[dev]")
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == [
        f"uv pip install -q --compile-bytecode --python {venv}/bin/python -e .[dev]"
    ]


def test_a_failed_uv_hands_the_same_arguments_to_pip_and_says_so(tmp_path):
    venv, log = make_venv(tmp_path, uv_status=2)
    result = venv_install(venv, "--no-deps", "funasr==1.4.16")
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines()[1] == "pip install -q --no-deps funasr==1.4.16"
    assert result.stdout.strip() == "[setup] uv pip install --no-deps funasr==1.4.16 failed: pip installs"


def test_without_uv_pip_installs_silently_and_its_failure_fails_the_step(tmp_path):
    venv, log = make_venv(tmp_path, uv_status=None, pip_status=1)
    result = venv_install(venv, "-e", ".")
    assert result.returncode == 1
    assert log.read_text().splitlines() == ["pip install -q -e ."]
    assert result.stdout == ""
