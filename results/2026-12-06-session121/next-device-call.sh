#!/bin/bash
# For session 122's device calls (timeout 560 each). Session 121 measured issue 17's grids and
# issue 20's Qwen2-0.5B and TinyLlama-2048 targets on an H100; TinyLlama at batch 1 and 8
# (prompt 128) ran out of its 150 s. PART=a: TinyLlama batch 1 and 8 (issue 20: 70% and 55%
# of the floor) with the tuning kept for PART=b on the same warm machine. PART=b: TinyLlama
# batch 1 against its peers (issue 20: >= 3x the hand-captured HF graph, >= 2x HF under
# torch.compile reduce-overhead, >= 1.1x the plain Llama under max-autotune; last measured in
# session 46). PART=c, on an H200 (kind nvidia-h200): Qwen2-0.5B batch 1 (49.3% there in
# session 108; 61.9% of an H100's floor in session 121).
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
PART=${PART:-a}
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
demo() {  # name seconds args...
  local name=$1 limit=$2; shift 2
  timeout $limit python3 -m tilegraph demo --no-sweeps --out /tmp/o/$name "$@" \
    > $OUT/$name.txt 2>&1
  echo "$name rc=$?" >> $OUT/0-gpu.txt
}
if [ "$PART" = a ]; then
  demo tinyllama-b1-b8 400 --model tinyllama --batch 1,8 --variants tilegraph
elif [ "$PART" = b ]; then
  demo tinyllama-b1-peers 520 --model tinyllama --batch 1 \
    --variants hf-graph,hf-compile,plain-autotune,tilegraph
else
  demo qwen2-b1 300 --model qwen2-0.5b --batch 1 --variants tilegraph
fi
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true
