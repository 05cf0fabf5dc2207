#!/bin/bash
# Session 119's fourth device call (six to eight minutes; timeout 500): demos at shapes and
# batches no issue names and no session had run through the demo: Qwen3-0.6B at batch 1 and
# 8 (head norms in the q|k|v epilogue at both), Phi-3-mini at batch 8; each with transformers
# eager and the hand-captured HF graph as peers, every variant checked first.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
demo() {  # file, timeout, demo arguments
  local file=$1 limit=$2; shift 2
  { echo "\$ tilegraph demo $*"
    COLUMNS=200 PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-d TRITON_CACHE_DIR=/tmp/tr-d \
      timeout $limit python3 -m tilegraph demo "$@" 2>&1 | grep -v "^\[\|UserWarning\|_sync_debug"
    echo "rc=${PIPESTATUS[0]}"; } > $OUT/$file 2>&1
}
demo 4-qwen3-0.6b.txt 250 --model qwen3-0.6b --batch 1,8 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out /tmp/demo-q3
demo 5-phi3-mini-b8.txt 200 --model phi3-mini --batch 8 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out /tmp/demo-phi3
