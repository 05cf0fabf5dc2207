#!/bin/bash
# session 79, call 4: the llama GPU tests on the final tree; long prompts' time to a first
# token untuned (default rules), old (.old = HEAD) against new: up to 2048 padded rows
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 timeout 100 python3 -m pytest -q -m gpu \
  tests/test_llama.py > $OUT/1-gpu-test_llama.txt 2>&1; echo "rc $?" >> $OUT/1-gpu-test_llama.txt
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src TILEGRAPH_AUTOTUNE=0 TILEGRAPH_CACHE_DIR=/tmp/c2$tree TRITON_CACHE_DIR=/tmp/t2$tree \
    timeout 85 python3 research/time_prefill.py $tree tinyllama 1792 1025 3x600 \
    > $OUT/2-ttft-long-untuned-$tree.txt 2>&1; echo "rc $?" >> $OUT/2-ttft-long-untuned-$tree.txt
done
