#!/bin/bash
# session 78, call 2: GPU tests of the changes; TinyLlama b1 Generator old vs new tree (the
# persistent step tiles); the first prefill's tuning with candidates compiled side by side
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
( timeout 140 python3 -m pytest -m gpu -q -x tests/test_matmul.py tests/test_autotune.py \
    -k "side_by_side or every_tma or every_candidate or autotune" 2>&1 | tail -5
  timeout 120 python3 -m pytest -m gpu -q -x tests/test_decode_plan.py \
    -k "persistent or step or rows" 2>&1 | tail -5
  timeout 100 python3 -m pytest -m gpu -q -x tests/test_generate.py -k "gemv_rows" 2>&1 | tail -5
) > $OUT/1-gpu-tests.txt 2>&1
for tree in new old; do
  src=$PWD/src; [ $tree = old ] && src=$PWD/.old/src
  PYTHONPATH=$src:$PWD/research TILEGRAPH_CACHE_DIR=/tmp/c_$tree TRITON_CACHE_DIR=/tmp/t_$tree \
    timeout 150 python3 research/time_generator.py $tree tinyllama 128 2048 1 \
    >> $OUT/2-time-generator-tinyllama-b1.txt 2>&1
  echo "rc $?" >> $OUT/2-time-generator-tinyllama-b1.txt
done
TILEGRAPH_CACHE_DIR=/tmp/c_pt TRITON_CACHE_DIR=/tmp/t_pt timeout 110 python3 \
  research/probe_prefill_tuning.py tinyllama:1x128 qwen2-0.5b:1x128 > $OUT/3-prefill-tuning.txt 2>&1
echo "rc $?" >> $OUT/3-prefill-tuning.txt
