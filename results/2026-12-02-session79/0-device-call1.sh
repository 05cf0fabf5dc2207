#!/bin/bash
# session 79, call 1: padded prefill + prefill graphs (research/prefill_graphs.diff applied
# to the working tree; HEAD in .old): GPU tests, then the time to a first token, old vs new
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" >> $OUT/gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c1 TRITON_CACHE_DIR=/tmp/t1 timeout 200 python3 -m pytest -q -x \
  tests/test_generate.py tests/test_llama.py -k "ragged or padded or prefill or greedy_tokens" \
  > $OUT/1-gpu-tests.txt 2>&1; echo "rc $?" >> $OUT/1-gpu-tests.txt
for tree in old new; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src TILEGRAPH_AUTOTUNE=0 TILEGRAPH_CACHE_DIR=/tmp/c2$tree TRITON_CACHE_DIR=/tmp/t2$tree \
    timeout 110 python3 research/time_prefill.py $tree tinyllama 128 37 8x128 100,60,128,20 \
    > $OUT/2-ttft-untuned-$tree.txt 2>&1; echo "rc $?" >> $OUT/2-ttft-untuned-$tree.txt
done
TILEGRAPH_CACHE_DIR=/tmp/c3 TRITON_CACHE_DIR=/tmp/t3 timeout 170 python3 research/time_prefill.py \
  new-tuned tinyllama 128 8x128 100,60,128,20 > $OUT/3-ttft-tuned-new.txt 2>&1
echo "rc $?" >> $OUT/3-ttft-tuned-new.txt
