#!/usr/bin/env bash
# Issue 10 on a lent GPU, in two parts that each fit one device call (see benchmarks/gpu_pass.sh for the
# carried site folder: SITE_TARBALL, default .gpu/site.tar.xz, a `pip install --target` of what the GPU image
# lacks: pyarrow, soundfile, kenlm built for its Python, pytest, rich, tqdm).
#
#   bash benchmarks/gpu_architectures.sh train   # pytest -m gpu of the new architectures; CUDA training smoke
#                                                # of squeezeformer and zipformer demo x f32/bf16/f16 + resume
#   bash benchmarks/gpu_architectures.sh bench   # fwd+bwd per audio second at equal size; training throughput
set -uo pipefail
part=${1:?train or bench}
OUT=${OUT:-runs/gpu_architectures}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KEDRO_DISABLE_TELEMETRY=1 DVC_NO_ANALYTICS=1
mkdir -p /tmp/site && tar -xJf "${SITE_TARBALL:-.gpu/site.tar.xz}" -C /tmp/site && export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/device.txt"
if [ "$part" = train ]; then
  echo "=== pytest -m gpu (new architectures) $(date +%T)"
  timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests/training/test_architecture_runs.py \
    tests/models 2>&1 | tail -15 | tee "$OUT/pytest_gpu.txt"
  echo "=== smoke $(date +%T)"
  timeout 500 python3 benchmarks/gpu_training_smoke.py --train .gpu/shards/train --val .gpu/shards/dev \
    --tokenizer .gpu/tokenizer.model --out /tmp/smoke --architectures squeezeformer zipformer --launches single \
    2>&1 | tail -12 | tee "$OUT/smoke.txt"
  cp /tmp/smoke/smoke.json "$OUT/" 2>/dev/null; tail -n 8 /tmp/smoke/*.log > "$OUT/smoke_logs.txt" 2>/dev/null
elif [ "$part" = bench ]; then
  echo "=== equal-size forward + backward $(date +%T)"
  timeout 150 python3 benchmarks/bench_architectures.py --sizes demo medium --steps 10 2>&1 | tail -9 \
    | tee "$OUT/architectures.txt"
  echo "=== training throughput $(date +%T)"
  timeout 300 python3 benchmarks/bench_training_throughput.py --variants sm zipformer:m w2v-bert:600m \
    --precisions f32 bf16 --modes eager --steps 10 --warmup 3 --json "$OUT/throughput.json" 2>&1 | tail -9 \
    | tee "$OUT/throughput.txt"
fi
echo "=== done $(date +%T)"
