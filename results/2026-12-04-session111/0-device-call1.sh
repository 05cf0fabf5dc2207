#!/bin/bash
# Session 111, call 1: (a) research/probe_rows_warp.py, fp32 at 5-8 rows with each weight
# row's sum over K inside a warp, against tg.linear; (b) a Llama-family shape no issue names,
# random weights from a config (SmolLM-360M's: 960 wide, 15 q heads on 5 kv heads, head_dim
# 64, 32 layers, tied head) against transformers eager and a hand-captured graph of it.
set -u
S=results/2026-12-04-session111
demo() {  # name, timeout, args...
  local name=$1 time=$2; shift 2
  { echo "\$ tilegraph demo $*"
    COLUMNS=200 PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-c TRITON_CACHE_DIR=/tmp/tr-c timeout $time python3 -m tilegraph demo "$@" --out $OUT/demo-$name; echo "rc=$?"; } > $OUT/$name.txt 2>&1
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
{ echo "\$ research/probe_rows_warp.py --rows 8,5 --tiles 4:4,8:4,8:8,16:8"
  PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-p TRITON_CACHE_DIR=/tmp/tr-p timeout 150 python3 research/probe_rows_warp.py --rows 8,5 --tiles 4:4,8:4,8:8,16:8; echo "rc=$?"; } > $OUT/1-rows-warp.txt 2>&1
demo 2-smollm 230 --model $S/configs/smollm-360m --batch 1,5 --variants hf-eager,hf-graph,tilegraph --no-sweeps --prompt-tokens 64 --new-tokens 48 --max-seq 256
cp $OUT/demo-*/*.json $OUT/ 2>/dev/null
cd $OUT && tar czf all.tgz *.txt *.json && rm -f *.txt *.json && rm -rf demo-*
