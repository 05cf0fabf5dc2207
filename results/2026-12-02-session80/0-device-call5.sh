#!/bin/bash
# session 80, call 5 (one H200): the final tree (9b0ba33): test_decode_attention.py's GPU
# tests whole and the in-step attention choice test (no kernel compiled in the captures).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
( TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 17-gpu-tests-attention 150 python3 -m pytest -q -n 8 -m gpu tests/test_decode_attention.py ) &
TILEGRAPH_CACHE_DIR=/tmp/c2 TRITON_CACHE_DIR=/tmp/t2 t 18-gpu-tests-generate-attention-choice 150 python3 -m pytest -q tests/test_generate.py -k "attention_launch_is_chosen"
wait
