# Set-up's venv steps, sourced by setup.sh (and by benchmarks/bench_setup_install.py, which times them):
#   venv_new PYTHON   a new venv at $VENV from PYTHON, with pip and wheel upgraded;
#   venv_get_uv       uv into $VENV unless it has it (where it cannot be had, pip goes on installing);
#   venv_install ARGS `pip install ARGS` into $VENV, done by uv where the venv has it.
#
# uv installs the versions pip would, in about half pip's time on 2 cores: it downloads and unpacks in parallel
# and compiles the bytecode on every core (the figures: docs/results/accuracy-per-minute.md). --compile-bytecode
# because Python may not write it at import (these machines set PYTHONDONTWRITEBYTECODE): without it every
# process would compile torch's modules again. uv reads no pip.conf; the project pins what matters
# (torch==2.11.0). Where uv fails (its index unreachable, a TLS proxy it does not trust), pip installs, with the
# machine's pip settings.
venv_new() {
  "$1" -m venv "$VENV" && "$VENV/bin/pip" install -q -U pip wheel
}

venv_get_uv() {
  [ -x "$VENV/bin/uv" ] || "$VENV/bin/pip" install -q "uv>=0.9" || echo "[setup] uv could not be installed: pip installs"
}

venv_install() {
  if [ -x "$VENV/bin/uv" ]; then
    "$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python" "$@" && return 0
    echo "[setup] uv pip install $* failed: pip installs"
  fi
  "$VENV/bin/pip" install -q "$@"
}
