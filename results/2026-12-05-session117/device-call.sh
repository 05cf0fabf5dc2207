#!/bin/bash
# Session 117's device call (about nine minutes; run with timeout 590). Each part writes its
# own file into $OUT as it ends (at most 8 come back); none starts after 470 s (listed in
# skipped.txt).
#   1. GPU tests of session 116's prologue add (tg.linear / tg.linear_qkv add_normed, every
#      decode plan that takes it), of session 117's head norms in the one-row q|k|v GEMV's
#      epilogue, and of the models through them (Gemma's 200 replays, the Gemma, Qwen3 and
#      LongRoPE tests); 3 workers (the real shapes need the memory of an H100);
#   2. tg.Generator at Gemma 3 1B's and Qwen3-0.6B's shapes, batch 1: heads normalised in the
#      projection's epilogue and apart (research/time_generator.py bands,head-norms-apart);
#   3. the same at Gemma 3 1B's and Gemma 2 2B's: Gemma's normed outputs added in the next
#      projection's prologue and apart (bands,norms-apart);
#   4. Qwen2-0.5B's batch-1 step on this tree and on session 115's (src-since-session-115.diff
#      reversed on a copy): no change where nothing is added or normalised;
#   5. Phi-3-mini's demo at batch 1, if time is left.
set -u
DEADLINE=$(( $(date +%s) + 470 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S=results/2026-12-05-session117
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
left kernel-tests && (run timeout 100 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_linear_qkv.py tests/test_rotary.py tests/test_decode_plan.py tests/test_linear.py -k "normed or head_norm or qwen3 or linear_qkv or rotary"; echo "rc=$?") > $OUT/1a-kernel-tests.txt 2>&1
left head-norms && (run timeout 150 python3 research/time_generator.py s117 gemma3-1b,qwen3-0.6b 128 2048 1 bands,head-norms-apart; echo "rc=$?") > $OUT/2-head-norms.txt 2>&1
left model-tests && (run timeout 160 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_llama.py tests/test_generate.py -k "replays or gemma or longrope or qwen3"; echo "rc=$?") > $OUT/1b-model-tests.txt 2>&1
left norms-apart && (run timeout 110 python3 research/time_generator.py s117 gemma3-1b,gemma2-2b 128 2048 1 bands,norms-apart; echo "rc=$?") > $OUT/3-norms-apart.txt 2>&1
if left trees; then
  rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src research /tmp/A/ && (cd /tmp/A && patch -R -s -p1 < $ROOT/$S/src-since-session-115.diff) || echo "patch failed" >> $OUT/4-trees.txt
  for tree in $ROOT /tmp/A; do
    (cd $tree && PYTHONPATH=$tree/src TILEGRAPH_CACHE_DIR=/tmp/tg-$(basename $tree) TRITON_CACHE_DIR=/tmp/tr-$(basename $tree) timeout 60 python3 research/time_generator.py $(basename $tree) qwen2-0.5b; echo "rc=$?") 2>&1 | grep "ms a token\|rc=\|Error" >> $OUT/4-trees.txt
  done
fi
left phi3 && { echo "\$ tilegraph demo --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 run timeout 120 python3 -m tilegraph demo --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out /tmp/demo-phi3 | tail -20
  echo "rc=${PIPESTATUS[0]}"; } > $OUT/5-phi3-mini.txt 2>&1
true
