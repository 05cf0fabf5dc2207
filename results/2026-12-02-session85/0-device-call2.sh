#!/bin/bash
# session 85, call 2 (one H200): attention's runs merged by a kernel of their own
# (merge_apart) against the rule and SDPA on few-pair caches of 16 MB and more; the
# decode-attention GPU tests with the new path.
export PYTHONPATH=$PWD/src:$PWD/research
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3 t 3-gpu-tests-attention 170 python3 -m pytest -m gpu -q -n 8 tests/test_decode_attention.py
TILEGRAPH_CACHE_DIR=/tmp/c4 TRITON_CACHE_DIR=/tmp/t4 t 4-sweep-apart 380 python3 research/sweep_decode_attention.py --sweep apart
