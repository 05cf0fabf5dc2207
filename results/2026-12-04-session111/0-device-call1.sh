#!/bin/bash
# Session 111, call 1: Llama-family shapes no issue names, random weights from a config
# (SmolLM-360M's: 960 wide, 15 q heads on 5 kv heads, head_dim 64, 32 layers, tied head;
# OpenLLaMA-3B's: 3200 wide, 32 heads of head_dim 100, no GQA, 26 layers), against
# transformers eager and a hand-captured graph of it, batch 1 and 5.
set -u
S=results/2026-12-04-session111
demo() {  # name, timeout, args...
  local name=$1 time=$2; shift 2
  { echo "\$ tilegraph demo $*"
    COLUMNS=200 PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-c TRITON_CACHE_DIR=/tmp/tr-c timeout $time python3 -m tilegraph demo "$@" --out $OUT/demo-$name; echo "rc=$?"; } > $OUT/$name.txt 2>&1
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
demo 1-smollm 230 --model $S/configs/smollm-360m --batch 1,5 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256
demo 2-openllama 260 --model $S/configs/openllama-3b --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256
cp $OUT/demo-*/*.json $OUT/ 2>/dev/null
cd $OUT && tar czf all.tgz *.txt *.json && rm -f *.txt *.json && rm -rf demo-*
