#!/bin/bash
# Session 131's third call: Apertus (xIELU's kernel between the up and down projections):
# its kernel's tests (the graph over replays with PDL), the tiny model through the kernels
# against transformers 5.17, then Apertus 8B's shape timed at batch 1.
set -u
export PYTHONPATH=$PWD/src TILEGRAPH_CACHE_DIR=/tmp/tg-demo
START=$(date +%s)
timeout 120 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 4 \
  tests/test_xielu.py tests/test_llama.py tests/test_generate.py -k "xielu or apertus" \
  > $OUT/1-tests.txt 2>&1
echo "tests rc=$? at $(( $(date +%s) - START )) s" > $OUT/0-log.txt
timeout 170 python3 -m tilegraph demo --no-sweeps --out /tmp/o/apertus --model apertus-8b \
  --batch 1 --variants tilegraph > $OUT/demos.txt 2>&1
echo "apertus rc=$? at $(( $(date +%s) - START )) s" >> $OUT/0-log.txt
tar czf $OUT/files.tgz -C /tmp/o . 2>/dev/null
true
