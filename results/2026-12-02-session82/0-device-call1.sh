#!/bin/bash
# session 82, call 1 (one H200): greedy steps that start from the embeddings the step before
# wrote (greedy_step's next_inputs): GPU tests, then TinyLlama and Qwen2-0.5B b1
# tg.Generator A/B in one process (bands = new, decode-start = the step as before).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 1-gpu-tests 240 python3 -m pytest -q -n 8 tests/test_greedy.py tests/test_decode_inputs.py tests/test_generate.py tests/test_llama.py
n=2
for model in tinyllama qwen2-0.5b; do
  PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c$n TRITON_CACHE_DIR=/tmp/t$n \
    t $n-time-generator-$model-b1 170 python3 research/time_generator.py new $model 128 2048 1 bands,decode-start,bands,decode-start
  n=$((n+1))
done
