#!/bin/bash
# session 81, call 3 (one H200): the final tree: test_generate.py's GPU tests (the band of
# what attention reads before its wait); issue 20's batch-1 demos, fresh caches; TinyLlama
# b1 tg.Generator old (.old = 229f573) and new again, fresh caches each.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
( TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 12-gpu-tests-generate 170 python3 -m pytest -q -n 4 tests/test_generate.py ) &
wait
for m in tinyllama qwen2-0.5b; do
  TILEGRAPH_CACHE_DIR=/tmp/c_$m TRITON_CACHE_DIR=/tmp/t_$m t 14-demo-$m-b1 110 python3 -m tilegraph demo --model $m --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo_$m
done
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c15$tree TRITON_CACHE_DIR=/tmp/t15$tree \
    t 15-time-generator-tinyllama-b1-$tree 75 python3 research/time_generator.py $tree tinyllama 128 2048 1
done
