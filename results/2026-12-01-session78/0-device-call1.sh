#!/bin/bash
# session 78, call 1: persistent gate/up and down tiles in TinyLlama's b1 step; a repeated
# prefill's time; whether the tuner's candidates can compile side by side
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c_mt TRITON_CACHE_DIR=/tmp/t_mt timeout 220 python3 \
  research/probe_model_tiles.py --model tinyllama --batch 1 --context 256 --persistent \
  > $OUT/3-persistent-tinyllama.txt 2>&1
echo "rc $?" >> $OUT/3-persistent-tinyllama.txt
TILEGRAPH_CACHE_DIR=/tmp/c_pp TRITON_CACHE_DIR=/tmp/t_pp timeout 100 python3 \
  research/profile_prefill.py tinyllama 1x128 cublas > $OUT/2-prefill-profile.txt 2>&1
echo "rc $?" >> $OUT/2-prefill-profile.txt
( for mode in serial threads-8 threads-16; do
    TRITON_CACHE_DIR=/tmp/t_pc_$mode timeout 75 python3 research/probe_parallel_compile.py $mode
    echo "rc $?"
  done ) > $OUT/1-parallel-compile.txt 2>&1
