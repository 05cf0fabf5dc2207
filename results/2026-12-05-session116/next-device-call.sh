#!/bin/bash
# Written in session 116 for the next device call (about nine minutes; run with timeout 590).
# Each part writes its own file into $OUT as it ends (at most 8 come back); none starts
# after 480 s (listed in skipped.txt).
#   1. GPU tests of session 116's prologue add (tg.linear / tg.linear_qkv add_normed, every
#      decode plan that takes it) and of the models through it (Gemma's 200 replays, the
#      Gemma and LongRoPE tests); 3 workers (the real shapes need the memory of an H100);
#   2. tg.Generator at Gemma 3 1B's and Gemma 2 2B's shapes, batch 1: the normed outputs added
#      in the next projection's prologue, and apart (research/time_generator.py variants
#      bands,norms-apart; at batch 8 the 16-bit rows take kernels that add apart anyway);
#   3. Qwen2-0.5B's batch-1 step on this tree and on session 115's
#      (src-since-session-115.diff reversed on a copy): no change where nothing is added;
#   4. session 111's chain probe (captures PyTorch's way now take the spare workspace) and
#      Phi-3-mini's demo at batch 1, if time is left.
set -u
DEADLINE=$(( $(date +%s) + 480 ))
left() { [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "skipped: $1" >> $OUT/skipped.txt; return 1; }; }
ROOT=$PWD S=results/2026-12-05-session116
run() { PYTHONPATH=$ROOT/src TILEGRAPH_CACHE_DIR=/tmp/tg-n TRITON_CACHE_DIR=/tmp/tr-n "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/0-gpu.txt 2>&1
left tests && (run timeout 170 python3 -m pytest -n 3 -q -rf --tb=short -p no:cacheprovider tests/test_decode_plan.py tests/test_linear.py tests/test_linear_qkv.py tests/test_llama.py tests/test_generate.py -k "normed or replays or gemma or longrope"; echo "rc=$?") > $OUT/1-tests.txt 2>&1
left time-gemma && (run timeout 150 python3 research/time_generator.py s116 gemma3-1b,gemma2-2b 128 2048 1 bands,norms-apart; echo "rc=$?") > $OUT/2-time-gemma.txt 2>&1
if left trees; then
  rm -rf /tmp/A && mkdir -p /tmp/A && cp -r src research /tmp/A/ && (cd /tmp/A && patch -R -s -p1 < $ROOT/$S/src-since-session-115.diff) || echo "patch failed" >> $OUT/3-trees.txt
  for tree in $ROOT /tmp/A; do
    (cd $tree && PYTHONPATH=$tree/src TILEGRAPH_CACHE_DIR=/tmp/tg-$(basename $tree) TRITON_CACHE_DIR=/tmp/tr-$(basename $tree) timeout 70 python3 research/time_generator.py $(basename $tree) qwen2-0.5b; echo "rc=$?") 2>&1 | grep "ms a token\|rc=\|Error" >> $OUT/3-trees.txt
  done
fi
left chain && (run timeout 60 python3 research/probe_plain_chain.py --shapes 1280x1280,1536x1536,2048x2048 --rows 8; echo "rc=$?") > $OUT/4-chain.txt 2>&1
left phi3 && { echo "\$ tilegraph demo --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps"
  COLUMNS=200 run timeout 150 python3 -m tilegraph demo --model phi3-mini --batch 1 --variants hf-eager,hf-graph,tilegraph --no-sweeps --out /tmp/demo-phi3 | tail -20
  echo "rc=${PIPESTATUS[0]}"; } > $OUT/5-phi3-mini.txt 2>&1
true
