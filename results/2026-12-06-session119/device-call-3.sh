#!/bin/bash
# Session 119's third device call (about 9 minutes; timeout 590): the gpu-marked model tests
# (test_llama.py, test_generate.py), 3 processes: real shapes need the memory of an 80 GB card.
set -u
PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-g TRITON_CACHE_DIR=/tmp/tr-g timeout 560 \
  python3 -m pytest -m gpu -n 3 -q -rfE --tb=short -p no:cacheprovider --durations=25 \
  tests/test_llama.py tests/test_generate.py > $OUT/2-gpu-model-tests.txt 2>&1
echo "rc=$?" >> $OUT/2-gpu-model-tests.txt
