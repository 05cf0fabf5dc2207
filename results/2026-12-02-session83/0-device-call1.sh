#!/bin/bash
# session 83, call 1 (one H200): every gpu-marked test of the suite in one run (not done in
# full since session 54); then tg.Generator against the hand-captured HF graph at batch
# sizes no issue names.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 1-gpu-tests-all 430 python3 -m pytest -m gpu -n 14 -v -p no:cacheprovider --durations=25 tests
TILEGRAPH_CACHE_DIR=/tmp/c2 TRITON_CACHE_DIR=/tmp/t2 t 2-demo-qwen2-0.5b-b5 120 python3 -m tilegraph demo --model qwen2-0.5b --batch 5 --variants hf-graph,tilegraph --no-sweeps --out $OUT/demo2
