#!/bin/bash
# session 80, call 3 (one H200): the GEMM search's short first round (old = .old2 = ac8daa6);
# attention's step candidates compiled side by side on other builds (old = .old = 222f099):
# Qwen2-0.5B b1 and TinyLlama b8; each run its own fresh caches.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 1-gpu-tests-autotune 60 python3 -m pytest -q -m gpu tests/test_autotune.py tests/test_matmul.py -k "autotune or side_by_side or search"
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old2/src
  PYTHONPATH=$src TILEGRAPH_CACHE_DIR=/tmp/c2$tree TRITON_CACHE_DIR=/tmp/t2$tree \
    t 2-prefill-search-$tree 60 python3 research/probe_prefill_tuning.py tinyllama:1x128 qwen2-0.5b:1x128
done
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c3$tree TRITON_CACHE_DIR=/tmp/t3$tree \
    t 3-time-generator-qwen2-b1-$tree 80 python3 research/time_generator.py $tree qwen2-0.5b 128 2048 1
done
for tree in new old; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c4$tree TRITON_CACHE_DIR=/tmp/t4$tree \
    t 4-time-generator-tinyllama-b8-$tree 120 python3 research/time_generator.py $tree tinyllama 128 2048 8
done
