#!/bin/bash
# session 80, call 4 (one H200): the final tree: issue 20's batch-1 demos (fresh caches, first
# builds as on a new machine), then test_generate.py whole (6 workers).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }

for m in tinyllama qwen2-0.5b; do
  TILEGRAPH_CACHE_DIR=/tmp/c_$m TRITON_CACHE_DIR=/tmp/t_$m t 1-demo-$m-b1 100 python3 -m tilegraph demo --model $m --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo_$m
done
TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3 t 2-gpu-tests-generate 190 python3 -m pytest -q -n 6 tests/test_generate.py
nvidia-smi --query-gpu=name --format=csv,noheader >> $OUT/2-gpu-tests-generate.txt
