#!/bin/bash
# session 77, call 2: GPU tests of the build changes; TinyLlama's batch-8 demo from fresh caches
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
timeout 150 python3 -m pytest -m gpu -q -x tests/test_side_effects.py tests/test_capture.py \
  tests/test_runner.py "tests/test_generate.py::test_attention_launch_is_chosen_in_the_decode_step" \
  > $OUT/tests.txt 2>&1; echo "rc $?" >> $OUT/tests.txt
mkdir -p /tmp/demo
TILEGRAPH_CACHE_DIR=/tmp/c_b8 TRITON_CACHE_DIR=/tmp/t_b8 timeout 420 python3 -m tilegraph demo \
  --model tinyllama --batch 8 --variants tilegraph --no-sweeps --out /tmp/demo \
  > $OUT/b8.txt 2> $OUT/b8-lines.txt; echo "rc $?" >> $OUT/b8.txt
tar czf $OUT/demo.tgz -C /tmp demo
