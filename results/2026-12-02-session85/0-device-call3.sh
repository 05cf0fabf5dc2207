#!/bin/bash
# session 85, call 3 (one H200): the attention grid at 8192 positions with runs merged apart
# (the rule alone, and among the tuned launches); GPU tests of attention, Llama and Generator.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c5 TRITON_CACHE_DIR=/tmp/t5 t 5-attention-grid-bf16-8192 280 python3 -m tilegraph bench attention-grid --dtype bf16 --contexts 8192 --rows 1,4 --out /tmp/d5 --format md,json
cp /tmp/d5/*.md $OUT/5-attention-grid-bf16-8192.md 2>/dev/null
TILEGRAPH_CACHE_DIR=/tmp/c6 TRITON_CACHE_DIR=/tmp/t6 t 6-gpu-tests 250 python3 -m pytest -m gpu -q -n 8 tests/test_decode_attention.py tests/test_llama.py tests/test_generate.py
