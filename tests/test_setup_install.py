"""Set-up's venv steps (``.ci/venv_install.sh``): uv installs where the venv has it, pip where it has not or
where uv fails, and the arguments reach either unchanged; a new venv gets pip and wheel upgraded, and uv when it
can be had. python, uv and pip are stand-ins that record their arguments and exit with a given status."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import PROJECT_ROOT

VENV_INSTALL = PROJECT_ROOT / ".ci" / "venv_install.sh"


def fake_tool(path: Path, log: Path, status: int) -> None:
    path.write_text(f'#!/usr/bin/env bash\necho "$(basename "$0") $*" >> {log}\nexit {status}\n')
    path.chmod(0o755)


def setup_step(venv: Path, *step: str) -> subprocess.CompletedProcess[str]:
    """``step`` (a function of venv_install.sh and its arguments) run as setup.sh runs it, under ``set -e``."""
    script = f'set -euo pipefail; VENV={venv}; source {VENV_INSTALL}; "$@"'
    return subprocess.run(["bash", "-c", script, "setup_step", *step], capture_output=True, text=True)


def venv_install(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return setup_step(venv, "venv_install", *args)


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


def test_a_new_venv_is_made_by_the_given_python_and_gets_pip_and_wheel_upgraded(tmp_path):
    venv, log = tmp_path / "venv", tmp_path / "calls.log"
    python = tmp_path / "python3.12"
    # A stand-in Python whose `-m venv DIR` makes DIR/bin/pip, itself a stand-in.
    python.write_text(
        f'#!/usr/bin/env bash\necho "python $*" >> {log}\nmkdir -p "$3/bin"\n'
        f'printf \'#!/usr/bin/env bash\\necho "pip $*" >> {log}\\n\' > "$3/bin/pip"\nchmod +x "$3/bin/pip"\n'
    )
    python.chmod(0o755)
    result = setup_step(venv, "venv_new", str(python))
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == [f"python -m venv {venv}", "pip install -q -U pip wheel"]


def test_uv_is_installed_once_and_a_failed_install_leaves_pip_to_go_on(tmp_path):
    venv, log = make_venv(tmp_path, uv_status=None, pip_status=1)
    result = setup_step(venv, "venv_get_uv")
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == ["pip install -q uv>=0.9"]
    assert result.stdout.strip() == "[setup] uv could not be installed: pip installs"
    fake_tool(venv / "bin" / "uv", log, 0)
    assert setup_step(venv, "venv_get_uv").returncode == 0
    assert log.read_text().splitlines() == ["pip install -q uv>=0.9"]
