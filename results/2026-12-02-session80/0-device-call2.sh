#!/bin/bash
# session 80, call 2 (one H200): the GPU tests call 1 cut (cuBLAS first), the attention
# step candidates compiled side by side (its tests), in three pytest runs side by side; then
# TinyLlama b1 Generator builds, old (.old = 222f099) and new, fresh caches each.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
( TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 1-gpu-tests-matmul-linear 200 python3 -m pytest -q -n 6 -m gpu tests/test_matmul.py tests/test_linear.py ) &
( TILEGRAPH_CACHE_DIR=/tmp/c2 TRITON_CACHE_DIR=/tmp/t2 t 2-gpu-tests-generate 200 python3 -m pytest -q -n 4 tests/test_generate.py -k "attention_launch_is_chosen or prefill or ragged or score or stream" ) &
( TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3 t 3-gpu-tests-attention 200 python3 -m pytest -q -n 4 -m gpu tests/test_decode_attention.py -k "step or right or preload or candidates" ) &
wait
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c4$tree TRITON_CACHE_DIR=/tmp/t4$tree \
    t 4-time-generator-tinyllama-b1-$tree 140 python3 research/time_generator.py $tree tinyllama 128 2048 1
done
