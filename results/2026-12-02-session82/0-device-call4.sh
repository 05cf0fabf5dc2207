#!/bin/bash
# session 82, call 4 (one H200): the final tree's GPU tests for what the session touched;
# tg.Generator A/B in one process on shapes no issue names (bands = new, decode-start = the
# step as before): Qwen2-1.5B shape b1, d=1024 head_dim 128 b3.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c11 TRITON_CACHE_DIR=/tmp/t11 t 11-gpu-tests 220 python3 -m pytest -q -n 8 tests/test_greedy.py tests/test_decode_inputs.py tests/test_rotary.py tests/test_generate.py tests/test_llama.py
PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c12 TRITON_CACHE_DIR=/tmp/t12 \
  t 12-time-generator-qwen2-1.5b-b1 150 python3 research/time_generator.py new qwen2-1.5b 128 2048 1 bands,decode-start,bands,decode-start
PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c13 TRITON_CACHE_DIR=/tmp/t13 \
  t 13-time-generator-d1024-h128-b3 150 python3 research/time_generator.py new d1024-h128 128 2048 3 bands,decode-start,bands,decode-start
