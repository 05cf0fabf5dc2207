#!/bin/bash
# Session 131's fourth call (a failed start left 288 s of device time): head norm biases in
# the rotary kernel (tg.rotary_qkv and tg.linear_qkv's second kernel, whole files: their
# signatures changed), then Persimmon, Fuyu and Qwen3 (whose prefill takes the rotary
# kernel) through the kernels against transformers 5.17; Persimmon 8B's shape timed only
# if time is left.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
timeout 100 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_rotary.py tests/test_linear_qkv.py > $OUT/1-tests.txt 2>&1
echo "kernel tests rc=$? at $(( $(date +%s) - START )) s" > $OUT/0-log.txt
timeout 70 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_llama.py tests/test_generate.py -k "persimmon or fuyu or qwen3" \
  >> $OUT/1-tests.txt 2>&1
echo "model tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
if [ $(( $(date +%s) - START )) -lt 60 ]; then
  timeout 100 python3 -m tilegraph demo --no-sweeps --out /tmp/o/persimmon \
    --model persimmon-8b --batch 1 --variants tilegraph > $OUT/demos.txt 2>&1
  echo "persimmon rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
fi
true
