#!/bin/bash
# session 77, call 4: what a prefill's first call at a new row count costs, and which candidates win
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c_p TRITON_CACHE_DIR=/tmp/t_p timeout 300 python3 \
  research/probe_prefill_tuning.py tinyllama:1x128,8x128,1x200 qwen2-0.5b:1x128,1x37 \
  > $OUT/prefill.txt 2>&1; echo "rc $?" >> $OUT/prefill.txt
