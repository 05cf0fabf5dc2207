#!/bin/bash
# session 81, call 4 (one H200): the batch-1 step's projection variants compiled side by
# side (tests); TinyLlama and Qwen2-0.5B b1 tg.Generator builds, old (.old = 84825ab) and
# new, fresh caches each.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
( TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 16-gpu-tests-generate-steps 150 python3 -m pytest -q -n 4 tests/test_generate.py -k "projection_variants or gemv_rows or release or attention_launch_is_chosen or tuned_projection" ) &
( TILEGRAPH_CACHE_DIR=/tmp/c2 TRITON_CACHE_DIR=/tmp/t2 t 17-gpu-tests-decode-plan 150 python3 -m pytest -q -m gpu tests/test_decode_plan.py -k "compiling_only or late or step" ) &
wait
n=18
for model in tinyllama qwen2-0.5b; do
  for tree in old new; do
    src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
    PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c$n$tree TRITON_CACHE_DIR=/tmp/t$n$tree \
      t $n-time-generator-$model-b1-$tree 70 python3 research/time_generator.py $tree $model 128 2048 1
  done
  n=$((n+1))
done
