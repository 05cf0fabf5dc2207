#!/bin/bash
# Session 119's second device call (about 9 minutes; timeout 590): every gpu-marked test but
# the model files (8 processes), the first whole run since session 109's; sessions 110-118
# changed the kernels (added norms, head norms at every row count, the GEMV race fix).
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-g TRITON_CACHE_DIR=/tmp/tr-g timeout 560 \
  python3 -m pytest -m gpu -n 8 -q -rfE --tb=short -p no:cacheprovider --durations=25 \
  --ignore tests/test_llama.py --ignore tests/test_generate.py tests > $OUT/1-gpu-tests.txt 2>&1
echo "rc=$?" >> $OUT/1-gpu-tests.txt
