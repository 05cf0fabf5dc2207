#!/bin/bash
# Session 129, call 3 (what device time was left after four starts found no machine):
# call 2's first steps alone. OPT 350M's model tests and the LayerNorm kernel's, the hand
# graph's sync check through the kernels; OPT 350M's demo (its hand graph syncs on the
# host: listed unavailable, tilegraph still built and timed).
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 150 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_llama.py tests/test_generate.py tests/test_layer_norm.py tests/test_model_demo.py \
  -k "opt or norms_after or layer_norm or host_syncing" > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-gpu.txt
left=$((START + ${GUARD:-150} - $(date +%s)))
if [ $left -gt 30 ]; then
  timeout $left python3 -m tilegraph demo --no-sweeps --out $OUT/opt350m --model opt-350m \
    --batch 1 --variants hf-graph,tilegraph 2>&1 | grep -v "^\[" > $OUT/opt350m.txt
  echo "opt350m rc=${PIPESTATUS[0]} at $(( $(date +%s) - START )) s" >> $OUT/0-gpu.txt
fi
true
