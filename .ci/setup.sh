#!/usr/bin/env bash
# One-time, idempotent set-up for a fresh machine: Debian packages, the virtualenv, and KenLM's
# lmplz/build_binary built from the kenlm sdist on PyPI (the wheel ships only the query module).
# A second run finds everything in place and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
STAMP_DIR="$VENV/.stamps"
source .ci/venv_install.sh  # venv_new, venv_get_uv, venv_install
APT_PACKAGES=(espeak-ng sox libsndfile1 ffmpeg cmake build-essential
              libboost-program-options-dev libboost-system-dev libboost-thread-dev libboost-test-dev
              zlib1g-dev libbz2-dev liblzma-dev
              sentencepiece  # spm_train: the external trainer behind `tokenizer --sentencepiece-command`
              chromium chromium-driver)  # the real browser that tests `asr-pipeline serve` (tests/serve)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python >= 3.12: fastabx (HuBERT's ABX scores) needs it. These machines carry it through pyenv, whose
# python3.12 shim refuses to run while another version is pyenv's global, so its folder is searched too.
find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.12 python3 "$(pyenv root 2>/dev/null || echo ~/.pyenv)"/versions/3.1[2-9]*/bin/python3 \
      /usr/bin/python3.12 /usr/local/bin/python3.12; do
    [ -n "$candidate" ] && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))' 2>/dev/null \
      && { echo "$candidate"; return 0; }
  done
  return 1
}
if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))'; then
  echo "[setup] $VENV is Python $("$VENV/bin/python" -c 'import platform; print(platform.python_version())'): recreating it"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  PYTHON=$(find_python) || { echo "[setup] no Python >= 3.12 found (set PYTHON=/path/to/python3.12)" >&2; exit 1; }
  echo "[setup] creating $VENV with $PYTHON ($("$PYTHON" --version))"
  venv_new "$PYTHON"
fi
mkdir -p "$STAMP_DIR"

# uv when it can be had: the same versions as pip in about half its time (.ci/venv_install.sh says why and how).
venv_get_uv

# KenLM's lmplz + build_binary, built from the kenlm sdist of the version pyproject.toml asks for, in the background
# while pip installs (the build needs only cmake, Boost and the sdist): the set-up's two longest steps overlap.
kenlm_pid=""
work=$(mktemp -d)
trap '[ -n "$kenlm_pid" ] && kill -- -"$kenlm_pid" 2>/dev/null; rm -rf "$work"' EXIT  # the build's whole group
build_kenlm() {
  local requirement src
  requirement=$(grep -o '"kenlm[^"]*"' pyproject.toml | tr -d '"')
  "$VENV/bin/pip" download -q --no-deps --no-binary kenlm -d "$work" "$requirement"
  tar -xzf "$work"/kenlm-*.tar.gz -C "$work"
  src=$(find "$work" -maxdepth 1 -type d -name 'kenlm-*' | head -n 1)
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DKENLM_MAX_ORDER=6
  cmake --build "$work/build" --target lmplz build_binary -j "$(nproc)"
  install -m 0755 "$work/build/bin/lmplz" "$work/build/bin/build_binary" "$VENV/bin/"
}
if [ ! -x "$VENV/bin/lmplz" ] || [ ! -x "$VENV/bin/build_binary" ]; then
  kenlm_log="$STAMP_DIR/kenlm-build.log"
  echo "[setup] building KenLM lmplz + build_binary from the kenlm sdist, in the background (log: $kenlm_log)"
  set -m  # its own process group, so a failed set-up stops cmake and the compilers too
  build_kenlm > "$kenlm_log" 2>&1 &
  kenlm_pid=$!
  set +m
fi

# Reinstall only when pyproject.toml changed since the last successful install.
proj_hash=$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$STAMP_DIR/pip-$proj_hash" ]; then
  echo "[setup] install -e .[dev] (torch wheels are large: a first install takes minutes)"
  venv_install -e '.[dev]'
  rm -f "$STAMP_DIR"/pip-*
  touch "$STAMP_DIR/pip-$proj_hash"
  echo "[setup] installed (${SECONDS}s)"
fi

# FunASR: test-only reference for the CIF parity tests (tests/models/test_cif.py). --no-deps because pip
# extras cannot say it and its requirements (modelscope, hydra, jieba, ...) are not needed: the test loads
# cif_predictor.py and the four small modules it imports without running funasr/__init__.py.
FUNASR_VERSION=1.4.16
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('funasr') != '$FUNASR_VERSION')" 2>/dev/null; then
  echo "[setup] install --no-deps funasr==$FUNASR_VERSION (test-only)"
  venv_install --no-deps "funasr==$FUNASR_VERSION"
fi

# mistral_common: Voxtral's Tekken tokenizer (hf_finetune; transformers' MistralCommonBackend). --no-deps because
# 1.13.1 pins numpy<2.4 on Python 3.12 and pip would downgrade our numpy; its other requirements are in pyproject.
MISTRAL_COMMON_VERSION=1.13.1
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mistral_common') != '$MISTRAL_COMMON_VERSION')" 2>/dev/null; then
  echo "[setup] install --no-deps mistral_common==$MISTRAL_COMMON_VERSION"
  venv_install --no-deps "mistral_common==$MISTRAL_COMMON_VERSION"
fi

if [ -n "$kenlm_pid" ]; then
  wait "$kenlm_pid" || { echo "[setup] the KenLM build failed ($kenlm_log):" >&2; tail -n 20 "$kenlm_log" >&2; exit 1; }
  kenlm_pid=""
  echo "[setup] KenLM lmplz + build_binary built (${SECONDS}s)"
fi
echo "[setup] ready: $VENV ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
