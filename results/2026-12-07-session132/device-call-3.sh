#!/bin/bash
# Session 132, call 3: the expert kernels' block rule from call 2 (small tiles, many
# programs): tests/test_experts.py, research/probe_experts.py at 1 and 8 rows, OLMoE
# 1B-7B's shape at batch 1 (call 1: 1.300 ms, 60.9% of the floor).
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-log.txt 2>&1
timeout 60 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 8 \
  tests/test_experts.py > $OUT/1-tests.txt 2>&1
echo "tests rc=$?" >> $OUT/0-log.txt
timeout 60 python3 research/probe_experts.py --rows 1,8 > $OUT/2-probe.txt 2>&1
echo "probe rc=$?" >> $OUT/0-log.txt
timeout 90 python3 -m tilegraph demo --no-sweeps --out /tmp/o/olmoe --model olmoe-1b-7b \
  --batch 1 --variants tilegraph > $OUT/3-demo.txt 2>&1
echo "demo rc=$?" >> $OUT/0-log.txt
