#!/bin/bash
# session 79, call 3: the final tree (prefill graphs): the fixed generate tests on the GPU,
# the TinyLlama b1 demo, and Qwen2-0.5B's time to a first token, old (.old = HEAD) then new
# sharing one tuning cache
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 timeout 100 python3 -m pytest -q \
  tests/test_generate.py -k "progress or ragged or prefill or score or stream" \
  > $OUT/1-gpu-test_generate.txt 2>&1; echo "rc $?" >> $OUT/1-gpu-test_generate.txt
TILEGRAPH_CACHE_DIR=/tmp/c_d TRITON_CACHE_DIR=/tmp/t_d timeout 150 python3 -m tilegraph demo \
  --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo1 \
  > $OUT/2-demo-tinyllama-b1.txt 2>&1; echo "rc $?" >> $OUT/2-demo-tinyllama-b1.txt
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  limit=190; [ $tree = new ] && limit=70
  PYTHONPATH=$src TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3$tree timeout $limit \
    python3 research/time_prefill.py $tree-tuned qwen2-0.5b 128 8x128 100,60,128,20 37 \
    > $OUT/3-ttft-qwen-tuned-$tree.txt 2>&1; echo "rc $?" >> $OUT/3-ttft-qwen-tuned-$tree.txt
done
