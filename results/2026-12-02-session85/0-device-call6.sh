#!/bin/bash
# session 85, call 6 (one H200): the GPU tests of plain_plan and the GEMVs on the final tree
# (call 5's run had one failure, cut before its report by the timeout).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c13 TRITON_CACHE_DIR=/tmp/t13 t 13-gpu-tests-decode-plan 170 python3 -m pytest -m gpu -q -x -n 8 tests/test_decode_plan.py
