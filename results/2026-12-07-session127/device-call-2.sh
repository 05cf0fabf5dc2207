#!/bin/bash
# Session 127, call 2: GPT-2's and OPT 1.3B's demos again after call 1's failures (a
# transformers step captured by hand that broke the process's later captures): the hand
# graph's step now warmed up under CUDA's sync check first, and given its position ids.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" 2>&1 \
    | grep -v "^\[" > $OUT/$name.txt
  echo "$name rc=${PIPESTATUS[0]}" >> $OUT/0-gpu.txt
}
demo gpt2 60 --model gpt2 --batch 1 --variants hf-graph,tilegraph
demo opt1.3b 90 --model opt-1.3b --batch 1 --variants hf-graph,tilegraph
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true
