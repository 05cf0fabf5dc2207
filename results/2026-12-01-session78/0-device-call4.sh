#!/bin/bash
# session 78, call 4: the GPU tests call 3's timeout cut, file by file
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
for f in test_matmul test_train test_llama; do
  TILEGRAPH_CACHE_DIR=/tmp/c_$f TRITON_CACHE_DIR=/tmp/t_$f timeout 130 python3 -m pytest -m gpu \
    -q tests/$f.py > $OUT/gpu-$f.txt 2>&1
  echo "rc $?" >> $OUT/gpu-$f.txt
done
