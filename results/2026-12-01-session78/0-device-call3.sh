#!/bin/bash
# session 78, call 3: GPU tests of the products' paths (matmul, training, Llama against HF);
# TinyLlama b1 demo on the final tree; a bf16 TrainStep's first build, old tree against new
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
TILEGRAPH_CACHE_DIR=/tmp/c_t TRITON_CACHE_DIR=/tmp/t_t timeout 230 python3 -m pytest -m gpu -q \
  tests/test_matmul.py tests/test_train.py tests/test_llama.py > $OUT/1-gpu-tests.txt 2>&1
echo "rc $?" >> $OUT/1-gpu-tests.txt
TILEGRAPH_CACHE_DIR=/tmp/c_d TRITON_CACHE_DIR=/tmp/t_d timeout 150 python3 -m tilegraph demo \
  --model tinyllama --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo1 \
  > $OUT/2-demo-tinyllama-b1.txt 2>&1
echo "rc $?" >> $OUT/2-demo-tinyllama-b1.txt
for tree in new old; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src TILEGRAPH_CACHE_DIR=/tmp/c_tr$tree TRITON_CACHE_DIR=/tmp/t_tr$tree \
    timeout 85 python3 research/train_gemm_picks.py --dtype bf16 --d 1024 --layers 8 \
    --tokens 512 > $OUT/3-train-build-$tree.txt 2>&1
  echo "rc $?" >> $OUT/3-train-build-$tree.txt
done
