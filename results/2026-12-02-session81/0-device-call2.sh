#!/bin/bash
# session 81, call 2 (one H200): GPU tests of the runs-of-one-tile candidate and the
# preloaded band; then tg.Generator builds and ms a token, old (.old = 229f573) and new,
# fresh caches each, Qwen2-0.5B, TinyLlama and Llama-3.2-1B at batch 1.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
( TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 7-gpu-tests-attention 150 python3 -m pytest -q -n 6 -m gpu tests/test_decode_attention.py ) &
( TILEGRAPH_CACHE_DIR=/tmp/c2 TRITON_CACHE_DIR=/tmp/t2 t 8-gpu-tests-generate-bands 150 python3 -m pytest -q -n 3 tests/test_generate.py -k "attention_launch_is_chosen or band" ) &
wait
n=9
for model in qwen2-0.5b tinyllama llama3.2-1b; do
  for tree in old new; do
    src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
    PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c$n$tree TRITON_CACHE_DIR=/tmp/t$n$tree \
      t $n-time-generator-$model-b1-$tree 75 python3 research/time_generator.py $tree $model 128 2048 1
  done
  n=$((n+1))
done
