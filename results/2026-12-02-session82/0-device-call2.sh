#!/bin/bash
# session 82, call 2 (one H200): issue 20's demos on the new tree (fresh caches): TinyLlama
# b1 twice, Qwen2-0.5B b1, TinyLlama from a 1792-token prompt, TinyLlama b8; Llama-3.2-1B b1
# tg.Generator A/B in one process (bands = new, decode-start = the step as before).
export PYTHONPATH=$PWD/src
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
for run in 1 2; do
  TILEGRAPH_CACHE_DIR=/tmp/c_$run TRITON_CACHE_DIR=/tmp/t_$run t 4-demo-tinyllama-b1-run$run 110 python3 -m tilegraph demo --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo_$run
done
TILEGRAPH_CACHE_DIR=/tmp/c_q TRITON_CACHE_DIR=/tmp/t_q t 5-demo-qwen2-0.5b-b1 110 python3 -m tilegraph demo --model qwen2-0.5b --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo_q
TILEGRAPH_CACHE_DIR=/tmp/c_l TRITON_CACHE_DIR=/tmp/t_l t 6-demo-tinyllama-prompt1792 120 python3 -m tilegraph demo --model tinyllama --batch 1 --prompt-tokens 1792 --variants tilegraph --no-sweeps --out /tmp/demo_l
PYTHONPATH=$PWD/src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c7 TRITON_CACHE_DIR=/tmp/t7 \
  t 7-time-generator-llama3.2-1b-b1 150 python3 research/time_generator.py new llama3.2-1b 128 2048 1 bands,decode-start,bands,decode-start
