#!/bin/bash
# session 79, call 2: prefill graphs (research/prefill_graphs.diff applied; HEAD in .old):
# the generate and llama GPU tests, then the time to a first token tuned, old then new tree
# sharing one tuning cache (the decode path is the same in both)
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 timeout 190 python3 -m pytest -q \
  tests/test_generate.py -k "not chosen and not checked_in_the_decode_step" --durations=5 \
  > $OUT/1-gpu-test_generate.txt 2>&1; echo "rc $?" >> $OUT/1-gpu-test_generate.txt
TILEGRAPH_CACHE_DIR=/tmp/c2 TRITON_CACHE_DIR=/tmp/t2 timeout 90 python3 -m pytest -q \
  tests/test_llama.py -k "padded or prefill or window or rows" --durations=5 \
  > $OUT/2-gpu-test_llama.txt 2>&1; echo "rc $?" >> $OUT/2-gpu-test_llama.txt
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  limit=210; [ $tree = new ] && limit=90
  PYTHONPATH=$src TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3$tree timeout $limit \
    python3 research/time_prefill.py $tree-tuned tinyllama 128 8x128 100,60,128,20 37 \
    > $OUT/3-ttft-tuned-$tree.txt 2>&1; echo "rc $?" >> $OUT/3-ttft-tuned-$tree.txt
done
