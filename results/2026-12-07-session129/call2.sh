#!/bin/bash
# Session 129, call 2: the hand graph's sync check landed (OPT 1.3B's demo, whose hand graph
# syncs on the host, must now list hf-graph unavailable and build tilegraph); issue 20's
# Qwen2-0.5B batch 1 on this tree; Falcon 7B's and MPT 7B's shapes, never timed.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
left() { echo $((START + ${GUARD:-575} - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 100 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -m gpu \
  tests/test_model_demo.py tests/test_capture.py > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-gpu.txt
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  if [ $(left) -lt $limit ]; then limit=$(left); fi
  if [ $limit -lt 40 ]; then echo "$name skipped ($(left) s left)" >> $OUT/0-gpu.txt; return; fi
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" 2>&1 \
    | grep -v "^\[" > $OUT/$name.txt
  echo "$name rc=${PIPESTATUS[0]} at $(( $(date +%s) - START )) s" >> $OUT/0-gpu.txt
  tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null   # (kept if a later step is cut off)
}
demo opt1.3b 90 --model opt-1.3b --batch 1 --variants hf-graph,tilegraph
demo qwen2 70 --model qwen2-0.5b --batch 1 --variants tilegraph
demo falcon7b 180 --model falcon-7b --batch 1 --variants tilegraph
demo mpt7b 180 --model mpt-7b --batch 1 --variants tilegraph
true
