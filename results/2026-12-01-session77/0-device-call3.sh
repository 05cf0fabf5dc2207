#!/bin/bash
# session 77, call 3: GPU tests of capture, runner and Generator; TinyLlama and Qwen2-0.5B b1 demos from fresh caches
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
timeout 60 python3 -m pytest -m gpu -q tests/test_capture.py tests/test_side_effects.py \
  tests/test_runner.py > $OUT/tests-capture.txt 2>&1; echo "rc $?" >> $OUT/tests-capture.txt
timeout 170 python3 -m pytest -m gpu -q tests/test_generate.py > $OUT/tests-generate.txt 2>&1
echo "rc $?" >> $OUT/tests-generate.txt
mkdir -p /tmp/demo
for m in tinyllama qwen2-0.5b; do
  TILEGRAPH_CACHE_DIR=/tmp/c_$m TRITON_CACHE_DIR=/tmp/t_$m timeout 160 python3 -m tilegraph demo \
    --model $m --batch 1 --variants tilegraph --no-sweeps --out /tmp/demo \
    > $OUT/$m.txt 2> $OUT/$m-lines.txt; echo "rc $?" >> $OUT/$m.txt
done
tar czf $OUT/demo.tgz -C /tmp demo
