#!/bin/bash
# session 85, call 4 (one H200): the attention grid in fp16 at 1024 and 8192 positions, batch
# 1 and 8 (the rule column now the rule alone, runs merged apart); TinyLlama from a
# 1792-token prompt (a layer's attention splits there and keeps its merge in the kernel).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c7 TRITON_CACHE_DIR=/tmp/t7 t 7-attention-grid-fp16 330 python3 -m tilegraph bench attention-grid --dtype fp16 --contexts 1024,8192 --rows 1,8 --out /tmp/d7 --format md,json
cp /tmp/d7/*.md $OUT/7-attention-grid-fp16.md 2>/dev/null
TILEGRAPH_CACHE_DIR=/tmp/c8 TRITON_CACHE_DIR=/tmp/t8 t 8-demo-tinyllama-prompt1792 150 python3 -m tilegraph demo --model tinyllama --batch 1 --prompt-tokens 1792 --variants tilegraph --no-sweeps --out /tmp/d8
