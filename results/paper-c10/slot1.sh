#!/usr/bin/env bash
# One GPU slot of the paper-c10 profile (docs/gpu.md), from a bare machine: the carried wheels and
# CIFAR-10, the three rates of benchmarks/device_paths.py, then the profile's notebooks through
# papermill under one time guard, Figure 3 and CIFAR-10C-imb (the two failing claims' rows) before
# Table 1's full block; the device-path tests last. Everything that must come back is packed into
# $OUT after each stage, so a command stopped at its limit still returns what was done.
# Usage: OUT=DIR bash slot.sh SECONDS [tiny]   (tiny: the CPU dry run's overrides, small benchmark)
set -u
total=${1:?seconds for the whole script}
tiny=${2:-}
start=$(date +%s)
left() { echo $(( start + total - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a "$OUT/slot.log"; }
PY=${PY:-python3}
W=$(mktemp -d)
pack() {  # results, figures, executed notebooks, logs, the source model's metadata: one file
  tar czf "$OUT/paper-c10.tgz" --ignore-failed-read results/paper-c10 figures/paper-c10 runs \
    "$W"/out 2>/dev/null
  ls data/checkpoints/*paper* >/dev/null 2>&1 && cp data/checkpoints/*paper*.json "$OUT/" 2>/dev/null
  true
}
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1 DART_WORKERS=${DART_WORKERS:-14}
if [ -z "$tiny" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=$PWD:/tmp/site
  eval "$($PY -m dartlib travel unpack-cifar10 --packed .gpu_carry/cifar10.xz --out /tmp/c10)" || exit 1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/device.txt"
  bench_args=(--source-steps 200 --gphi-steps 1000 --test-images 50000)
  run_args=()
else
  bench_args=(--arch resnet26-w16 --source-steps 6 --gphi-steps 30 --test-images 1000)
  run_args=(--overrides notebooks/profiles/dry-run/paper-c10.yaml --output "$W/out")
  export DART_DATA_DIR=$W/data
fi
log "setup done; CIFAR-10 at ${DART_CIFAR10_DIR:-?}"
timeout 120 $PY benchmarks/device_paths.py "${bench_args[@]}" --json "$OUT/rates.json" 2>&1 | tee "$OUT/rates.txt"
log "rates measured"
reserve=70  # the device-path tests and the packing
# Figure 3 (05) and CIFAR-10C-imb (11) hold the rows of both failing claims: they run before Table 1 (06)
$PY -m dartlib run --profile paper-c10 "${run_args[@]}" --publish --budget $(( $(left) - reserve )) \
  00 02 04 05 11 2>&1 | tee "$OUT/run1.log"
log "run 1 (00 02 04 05 11) exit ${PIPESTATUS[0]}"; pack
if [ "$(left)" -gt $(( reserve + 30 )) ]; then
  $PY -m dartlib run --profile paper-c10 "${run_args[@]}" --publish --budget $(( $(left) - reserve )) \
    06 99 2>&1 | tee "$OUT/run2.log"
  log "run 2 (06 99) exit ${PIPESTATUS[0]}"; pack
fi
timeout $(( $(left) - 15 )) $PY -m pytest -q -p no:cacheprovider .gpu_carry/tests/test_device_paths.py 2>&1 | tail -5 | tee "$OUT/device_tests.txt"
log "device-path tests done"; pack
log "end"
