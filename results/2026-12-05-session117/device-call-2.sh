#!/bin/bash
# Session 117, second call (about nine minutes; timeout 590): where Gemma 3 1B's and Qwen3-
# 0.6B's decode step spends its time, kernel by kernel (research/profile_llama_decode.py:
# eager kernel times, the graph replay's exposed time a kernel, the Generator's own graph),
# batch 1 and Gemma 3 at batch 8. Each part writes its file into $OUT as it ends; none
# starts after 480 s.
set -u
DEADLINE=$(( $(date +%s) + 480 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
run() { PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
for spec in gemma3-1b:1 qwen3-0.6b:1 gemma3-1b:8 qwen2-0.5b:1; do
  m=${spec%:*} b=${spec#*:}
  left "$spec" && (run timeout 170 python3 research/profile_llama_decode.py --model $m --batch $b; echo "rc=$?") > $OUT/profile-$m-b$b.txt 2>&1
done
true
