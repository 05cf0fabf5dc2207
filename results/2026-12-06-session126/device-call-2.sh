#!/bin/bash
# Session 126's second call: Falcon 7B's shape (random weights, bf16) at batch 1 and 4
# against transformers eager, its hand-captured graph (which transformers 5.17's Falcon
# refuses: listed as unavailable) and torch.compile's reduce-overhead.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt 2>&1
timeout 420 python3 -m tilegraph demo --no-sweeps --out /tmp/o/falcon7b --model falcon-7b \
  --batch 1,4 --variants hf-eager,hf-graph,hf-compile,tilegraph 2>&1 | grep -v "^\[" \
  > $OUT/falcon7b.txt
echo "falcon7b rc=${PIPESTATUS[0]}" >> $OUT/0-gpu.txt
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true
