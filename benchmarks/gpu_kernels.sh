#!/usr/bin/env bash
# The kernel suite's (issue 12) and the CUDA decoder's (issue 11) figures on a lent GPU, in two parts that each
# fit one device call. Run from the repo root on a CUDA machine whose python3 has torch, triton and pyarrow; what
# its image lacks (kenlm, soundfile + cffi) comes from SITE_TARBALL (default .gpu/site_slim.tar.xz, a
# `pip install --target` for that python), wheels in .whl/ (flashlight-text) are added to it.
#
#   bash benchmarks/gpu_kernels.sh kernels   # kernel-bench bf16 + fp32, the parity files with compiled kernels,
#                                            # the gpu-marked tests, the decoders (needs DATA=.gpu/data: a
#                                            # trimmed copy of data/ with the demo run, LMs, test shards)
#   bash benchmarks/gpu_kernels.sh training  # kernel-bench past the L2 cache, the gpu-marked tests, and
#                                            # bench_kernel_training: zipformer and squeezeformer steps with
#                                            # kernels triton vs reference vs reference + torch.compile
#
# Logs and JSON go to $OUT (default runs/gpu_kernels); each step has its own time limit so the call ends in time.
set -uo pipefail
part=${1:?kernels or training}
OUT=${OUT:-runs/gpu_kernels}
mkdir -p "$OUT" /tmp/site
export PYTHONUNBUFFERED=1 KEDRO_DISABLE_TELEMETRY=1 DVC_NO_ANALYTICS=1
tar -xJf "${SITE_TARBALL:-.gpu/site_slim.tar.xz}" -C /tmp/site || exit 1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, triton, pyarrow; print('torch', torch.__version__, 'triton', triton.__version__,
'cuda', torch.version.cuda, 'pyarrow', pyarrow.__version__)" | tee -a "$OUT/device.txt"
section() { echo; echo "=== $1 ($(date +%T))"; }
# The kernels compile for the GPU: never the interpreter here.
unset TRITON_INTERPRET

if [ "$part" = kernels ]; then
  for dtype in bfloat16 float32; do
    section "kernel-bench $dtype"
    timeout 120 python3 -m asr_pipeline.cli kernel-bench --backend cuda --dtype $dtype --json "$OUT/kb_$dtype.json" \
      2>&1 | tee "$OUT/kb_$dtype.txt" | tail -n 40
  done
  section "kernel parity files, compiled kernels on CUDA"
  ASR_KERNELS_TEST_DEVICE=cuda timeout 80 python3 -m pytest tests/kernels -m "not gpu" -n 8 -q -p no:cacheprovider \
    -o addopts="" 2>&1 | tail -n 25 | tee "$OUT/parity.txt"
  section "pytest -m gpu (the rest)"
  timeout 110 python3 -m pytest -m gpu -n 6 -q -p no:cacheprovider -o addopts="" -rfEs \
    --deselect tests/kernels/test_cuda_rerun.py::test_parity_holds_for_the_compiled_kernels_on_cuda \
    tests/cli/test_kernel_bench.py tests/decoding tests/training/test_architecture_runs.py \
    tests/training/test_precision.py 2>&1 | tail -n 25 | tee "$OUT/pytest_gpu.txt"
  section "which shapes torchaudio's cuda_ctc_decoder survives"
  timeout 60 python3 benchmarks/probe_cuda_ctc_decoder.py --beams 1 4 8 10 16 --batches 16 --frames 50 400 2>&1 \
    | tee "$OUT/cuda_probe.txt"
  section "decoders on one run's log-probs"
  timeout 60 python3 benchmarks/bench_decoders.py --data "${DATA:-.gpu/data}" --cuda-beams ${CUDA_BEAMS:-1 4 16} \
    2>&1 | tail -n 16 | tee "$OUT/decoders.txt"
elif [ "$part" = training ]; then
  section "kernel-bench bfloat16 at a size past the L2 cache"
  timeout 120 python3 -m asr_pipeline.cli kernel-bench --backend cuda --dtype bfloat16 --batch 16 --seq-len 1024 \
    --channels 2048 --heads 8 --json "$OUT/kb_large.json" 2>&1 | grep -v -i warn | tail -n 26 | tee "$OUT/kb_large.txt"
  section "pytest -m gpu without the cuda decoder (it aborts at beam 16 on Hopper: pytorch/audio#3754)"
  timeout 150 python3 -m pytest -m gpu -n 6 -q -p no:cacheprovider -o addopts="" -rfEs \
    --deselect tests/kernels/test_cuda_rerun.py::test_parity_holds_for_the_compiled_kernels_on_cuda \
    --deselect tests/decoding/test_flashlight.py::test_the_cuda_decoder_agrees_with_the_cpu_lexicon_free_search \
    tests/cli/test_kernel_bench.py tests/decoding tests/training/test_architecture_runs.py \
    tests/training/test_precision.py > "$OUT/pytest_gpu.txt" 2>&1
  grep -E "^(FAILED|ERROR|E  )|passed|failed" "$OUT/pytest_gpu.txt" | tail -n 30
  for model in zipformer:s squeezeformer:s; do
    section "training step $model: triton vs reference vs compile"
    timeout ${TRAINING_LIMIT:-140} python3 benchmarks/bench_kernel_training.py --models $model --steps 8 --warmup 2 \
      ${TRAINING_ARGS:-} 2>&1 | grep -v -i warn | tee "$OUT/kernel_training_${model%%:*}.txt" | tail -n 14
  done
fi
section done
