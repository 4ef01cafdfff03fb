#!/usr/bin/env bash
# Second GPU call: the three rates (benchmarks/device_paths.py), then the paper recipe's source training
# (python -m dartlib train --profile paper-c10) with a wall-clock stamp on each epoch line, stopped at
# the limit: the epoch time inside train_source against the wall time between epochs (saving the
# resumable state after each epoch included).
set -u
total=${1:?seconds}; start=$(date +%s)
PY=python3; export PYTHONUNBUFFERED=1 DART_WORKERS=14
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site
eval "$($PY -m dartlib travel unpack-cifar10 --packed .gpu_carry/cifar10.xz --out /tmp/c10)" || exit 1
TQDM_DISABLE=1 timeout 100 $PY benchmarks/device_paths.py --train-images 50000 --source-steps 240 --gphi-steps 1000 \
  --test-images 50000 --json "$OUT/rates.json" 2>&1 | tee "$OUT/rates.txt"
echo "[$(( $(date +%s) - start )) s] rates done"
timeout $(( start + total - $(date +%s) )) $PY -m dartlib train --profile paper-c10 --directory /tmp/src 2>/dev/null \
  | while IFS= read -r line; do echo "$(date +%s.%N | cut -c1-14) $line"; done | tee "$OUT/train.log" | tail -4
ls -la /tmp/src | tee -a "$OUT/train.log"
echo "[$(( $(date +%s) - start )) s] end"
