#!/bin/bash
# session 80, call 1 (one H200): cuBLAS first for untimed GEMMs. GPU tests it touches; the
# time to a first token untuned, old (.old = 222f099) against new; which kind wins products
# of shapes no session timed (the untuned default's loss against the tuned pick); untuned
# training steps old against new.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
t() { local name=$1 limit=$2; shift 2; echo "\$ $*" > $OUT/$name.txt; timeout $limit "$@" >> $OUT/$name.txt 2>&1; echo "rc $?" >> $OUT/$name.txt; }
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 t 1-gpu-tests-matmul-linear 150 python3 -m pytest -q -x -m gpu tests/test_matmul.py tests/test_linear.py
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src TILEGRAPH_AUTOTUNE=0 TILEGRAPH_CACHE_DIR=/tmp/c2$tree TRITON_CACHE_DIR=/tmp/t2$tree \
    t 2-ttft-untuned-$tree 70 python3 research/time_prefill.py $tree tinyllama 128 8x128 1792 1025
done
TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3 t 3-prefill-kinds 70 python3 research/probe_prefill_tuning.py llama3.2-1b:1x300 qwen2-0.5b:3x40
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src TILEGRAPH_AUTOTUNE=0 TILEGRAPH_CACHE_DIR=/tmp/c4$tree TRITON_CACHE_DIR=/tmp/t4$tree \
    t 4-train-untuned-$tree 40 python3 -m tilegraph bench train --dtype bf16 --rows 512 --widths 1024 --variants "hand graph,tilegraph TrainStep"
done
TILEGRAPH_CACHE_DIR=/tmp/c5 TRITON_CACHE_DIR=/tmp/t5 t 5-gpu-tests-train-llama 100 python3 -m pytest -q -m gpu tests/test_train.py tests/test_llama.py
TILEGRAPH_CACHE_DIR=/tmp/c6 TRITON_CACHE_DIR=/tmp/t6 t 6-gpu-tests-generate-prefill 50 python3 -m pytest -q tests/test_generate.py -k "prefill or ragged or score"
