#!/usr/bin/env bash
# The GPU verification pass (issue 19), in two parts that each fit one device call. Run from the repo root on
# a CUDA machine whose python3 has torch/triton; the project's other dependencies come from a site folder
# (SITE_TARBALL, a tar.xz of a `pip install --target` for that python) since the GPU machine has no index.
#
#   bash benchmarks/gpu_pass.sh train   # smoke training x precisions x launches + resume, decode parity,
#                                       # loader feed, GLU kernel bench    (needs SHARDS=demo f16 shards dir)
#   bash benchmarks/gpu_pass.sh tests   # pytest -m gpu, the fast suite with CUDA visible, throughput table
#
# Logs and tables go to $OUT (default runs/gpu_pass).
set -uo pipefail
part=${1:?train or tests}
OUT=${OUT:-runs/gpu_pass}
SHARDS=${SHARDS:-.gpu/shards}
GPU_DATA=${GPU_DATA:-.gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KEDRO_DISABLE_TELEMETRY=1 DVC_NO_ANALYTICS=1
if [ -n "${SITE_TARBALL:-}" ]; then
  mkdir -p /tmp/site && tar -xJf "$SITE_TARBALL" -C /tmp/site
  export PYTHONPATH=/tmp/site
fi
PY=${PY:-python3}
# The project itself, editable, without touching the machine's packages (its console script included).
$PY -m pip install -q --no-deps --no-build-isolation --no-index -e . || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
$PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/device.txt"

section() { echo; echo "=== $1 ($(date +%T))"; }
# SKIP="glu feed": leave those sections out (names: smoke decode feed glu gpu fast throughput)
want() { [[ " ${SKIP:-} " != *" $1 "* ]]; }

if [ "$part" = train ]; then
  want smoke && {
  section "training smoke"
  $PY benchmarks/gpu_training_smoke.py --train "$SHARDS/train" --val "$SHARDS/dev" \
    --tokenizer "$GPU_DATA/tokenizer.model" --out /tmp/smoke 2>&1 | tee "$OUT/smoke.txt"
  cp /tmp/smoke/smoke.json "$OUT/" 2>/dev/null
  tail -n 30 /tmp/smoke/*.log > "$OUT/smoke_logs.txt" 2>/dev/null
  }
  want decode && {
  section "decode parity"
  $PY benchmarks/gpu_decode_parity.py --run-dir /tmp/smoke/squeezeformer-f32-single --shards "$SHARDS/test" \
    --lm "$GPU_DATA/lm.binary" 2>&1 | tee "$OUT/decode.txt"
  }
  want feed && {
  section "loader feed"
  $PY benchmarks/bench_loader_feed.py --shards "$SHARDS/train" --tokenizer "$GPU_DATA/tokenizer.model" \
    --variant xs --precision bf16 --workers 0 2 4 8 2>&1 | tee "$OUT/feed.txt"
  }
  want glu && {
  section "GLU kernel"
  $PY benchmarks/bench_glu.py 2>&1 | tee "$OUT/glu.txt"
  }
elif [ "$part" = tests ]; then
  want gpu && {
  section "pytest -m gpu"
  $PY -m pytest -m gpu -q -p no:cacheprovider -o addopts="" --strict-markers -ra 2>&1 | tee "$OUT/pytest_gpu.txt"
  }
  want fast && {
  section "fast suite, CUDA visible"
  $PY -m pytest -m "not slow" -q -p no:cacheprovider -o addopts="" -n 16 --timeout 300 2>&1 | tail -n 80 \
    | tee "$OUT/pytest_fast.txt"
  }
  want throughput && {
  section "training throughput"
  $PY benchmarks/bench_training_throughput.py --json "$OUT/throughput.json" ${THROUGHPUT_ARGS:-} 2>&1 \
    | tee "$OUT/throughput.txt"
  }
fi
