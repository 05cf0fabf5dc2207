#!/bin/bash
# session 83, call 2 (one H200): tg.Generator against the hand-captured HF graph at batch
# sizes no issue names (each a fresh tuning cache: the cold build a user's first run pays).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3 t 3-demo-qwen2-0.5b-b5 215 python3 -m tilegraph demo --model qwen2-0.5b --batch 5 --variants hf-graph,tilegraph --no-sweeps --out /tmp/d3
TILEGRAPH_CACHE_DIR=/tmp/c4 TRITON_CACHE_DIR=/tmp/t4 t 4-demo-tinyllama-b3 160 python3 -m tilegraph demo --model tinyllama --batch 3 --variants hf-graph,tilegraph --no-sweeps --out /tmp/d4
TILEGRAPH_CACHE_DIR=/tmp/c5 TRITON_CACHE_DIR=/tmp/t5 t 5-demo-llama3.2-1b-b6 180 python3 -m tilegraph demo --model llama3.2-1b --batch 6 --variants hf-graph,tilegraph --no-sweeps --out /tmp/d5
