#!/bin/bash
# session 85, call 5 (one H200): the GEMV's tile at 2-16 rows (four a program) timed by
# plain_plan beside the rule and cuBLAS on weights L2 holds: GPU tests of the projections,
# what plain_plan keeps on the grid's small shapes and shapes no issue names, issue 17's
# grid in bf16 and fp16.
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c9 TRITON_CACHE_DIR=/tmp/t9 t 9-gpu-tests-projections 140 python3 -m pytest -m gpu -q -n 8 tests/test_decode_plan.py tests/test_linear.py
TILEGRAPH_CACHE_DIR=/tmp/c10 TRITON_CACHE_DIR=/tmp/t10 t 10-plain-pick-small 100 python3 research/probe_plain_pick.py --shape 256x2048,2048x2048,1024x1024,896x896,512x4096,1536x1536 --rows 2,4,8,16 --dtypes bf16 --repeats 1
TILEGRAPH_CACHE_DIR=/tmp/c11 TRITON_CACHE_DIR=/tmp/t11 t 11-decode-grid-bf16 150 python3 -m tilegraph bench decode-grid --dtype bf16 --out /tmp/d11 --format md,json
cp /tmp/d11/decode-grid.md $OUT/11-decode-grid-bf16.md 2>/dev/null
TILEGRAPH_CACHE_DIR=/tmp/c12 TRITON_CACHE_DIR=/tmp/t12 t 12-decode-grid-fp16 140 python3 -m tilegraph bench decode-grid --dtype fp16 --out /tmp/d12 --format md,json
cp /tmp/d12/decode-grid.md $OUT/12-decode-grid-fp16.md 2>/dev/null
