# venv_install ARGS...: `pip install ARGS` into $VENV, done by uv where the venv has it. Sourced by setup.sh.
#
# uv installs the versions pip would, in 0.5-0.6x pip's time on 2 cores (167 s against 329 s, then 184 s against
# 296 s, 2026-11-28): it downloads and unpacks in parallel and compiles the bytecode on every core
# (benchmarks/bench_setup_install.py). --compile-bytecode because Python may not write it at import (these machines
# set PYTHONDONTWRITEBYTECODE): without it every process would compile torch's modules again. uv reads no pip.conf;
# the project pins what matters (torch==2.11.0). Where uv fails (its index unreachable, a TLS proxy it does not
# trust), pip installs, with the machine's pip settings.
venv_install() {
  if [ -x "$VENV/bin/uv" ]; then
    "$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python" "$@" && return 0
    echo "[setup] uv pip install $* failed: pip installs"
  fi
  "$VENV/bin/pip" install -q "$@"
}
