#!/bin/bash
# Session 109 call 4: every gpu-marked test on main as it stands (session 108's norm fold
# touched the decode kernels; its call-2 shards had stopped at their limit). pytest-xdist,
# 14 workers, as session 83 ran them; 8 sharded processes where xdist is missing.
set -u
export TILEGRAPH_CACHE_DIR=/tmp/tg-suite TRITON_CACHE_DIR=/tmp/tr-suite
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/0-gpu.txt
if python3 -c "import xdist" 2>/dev/null; then
  { echo "\$ pytest -m gpu -n 14 tests"; PYTHONPATH=$PWD/src timeout 520 python3 -m pytest -m gpu -n 14 -q \
      -p no:cacheprovider --durations=15 -rfEs tests; echo "rc=$?"; } > $OUT/1-gpu-suite.txt 2>&1
else
  for i in 0 1 2 3 4 5 6 7; do
    ( export SHARD=$i/8 PYTHONPATH=$PWD/src:$PWD/results/2026-12-04-session103
      { timeout 520 python3 -m pytest -m gpu -q -p shard -p no:cacheprovider -rfEs tests; echo "rc=$?"; } \
        > $OUT/1-gpu-suite-shard$i.txt 2>&1 ) &
  done
  wait
fi
cd $OUT && tar czf all.tgz *.txt && rm *.txt
