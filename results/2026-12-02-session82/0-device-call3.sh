#!/bin/bash
# session 82, call 3 (one H200): batched tg.Generator A/B in one process (bands = new,
# decode-start = the step as before): TinyLlama b8, Qwen2-0.5B b4; then where the new
# batch-1 TinyLlama step's time goes in the Generator's graph.
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c8 TRITON_CACHE_DIR=/tmp/t8 \
  t 8-time-generator-tinyllama-b8 230 python3 research/time_generator.py new tinyllama 128 2048 8 bands,decode-start,bands,decode-start
PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c9 TRITON_CACHE_DIR=/tmp/t9 \
  t 9-time-generator-qwen2-0.5b-b4 180 python3 research/time_generator.py new qwen2-0.5b 128 2048 4 bands,decode-start,bands,decode-start
TILEGRAPH_CACHE_DIR=/tmp/c10 TRITON_CACHE_DIR=/tmp/t10 t 10-profile-tinyllama-b1 150 python3 research/profile_llama_decode.py --model tinyllama --batch 1 --context 256
