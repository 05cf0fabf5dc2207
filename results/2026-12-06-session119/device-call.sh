#!/bin/bash
# Session 119's first device call (session 118's third, which never ran) (three to five minutes; timeout 330): the several-row GEMV's
# norm of h moved past PDL's wait (it read h before the kernel that wrote it had finished:
# Gemma 2 2B's and Gemma 3 1B's batch-2 decode off in call 1), checked by the tests that
# caught it and the new two-row kernel test; then Phi-3-mini's demo with the hand-captured
# HF graph over full cache layers (its check failed in call 2); then Qwen2-0.5B's batch-1
# step on this tree and on session 115's (src-since-session-115.diff reversed on a copy).
set -u
DEADLINE=$(( $(date +%s) + 200 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S=results/2026-12-06-session118
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
(run timeout 150 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_linear.py tests/test_llama.py -k "normed_adds_chained or replays_equal_eager or (teacher_forced and gemma)"; echo "rc=$?") > $OUT/8-race-fix-tests.txt 2>&1
left phi3 && { echo "\$ tilegraph demo --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 run timeout 120 python3 -m tilegraph demo --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out /tmp/demo-phi3 | tail -12
  echo "rc=${PIPESTATUS[0]}"; } > $OUT/10-phi3-mini.txt 2>&1
if left trees; then
  rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src research /tmp/A/ && (cd /tmp/A && patch -R -s -p1 < $ROOT/$S/src-since-session-115.diff) || echo "patch failed" >> $OUT/9-trees.txt
  for tree in $ROOT /tmp/A; do
    (cd $tree && PYTHONPATH=$tree/src TILEGRAPH_CACHE_DIR=/tmp/tg-$(basename $tree) TRITON_CACHE_DIR=/tmp/tr-$(basename $tree) timeout 60 python3 research/time_generator.py $(basename $tree) qwen2-0.5b; echo "rc=$?") 2>&1 | grep "ms a token\|rc=\|Error" >> $OUT/9-trees.txt
  done
fi
true
